/**
 * Credentials out of every message: a URL's `user:password@` part is masked wherever a URL
 * appears in a text (a bad DATABASE_URL, a driver error quoting its connection string). Kept apart
 * from config and the log so both use the same rule.
 */

// scheme://userinfo@ — userinfo up to the last '@' before the host, so a password holding '@' or
// ':' is masked whole. It stops at whitespace and quotes, which never belong to a URL.
const USERINFO = /([a-z][a-z0-9+.-]*:\/\/)([^\s"'`<>]*)@/gi;

export function redactCredentials(text: string): string {
  return text.replace(USERINFO, (_whole, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    const user = colon === -1 ? userinfo : userinfo.slice(0, colon);
    // A user name with '/' is not one: the '@' belonged to something else; mask it all.
    return /[/?#]/.test(user) ? `${scheme}***@` : `${scheme}${user}${colon === -1 ? '' : ':***'}@`;
  });
}
