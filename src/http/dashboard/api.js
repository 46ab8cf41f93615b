// The console's one API client: the same HTTP API as every shop's client, with the same token.
// The token lives in sessionStorage: it ends with the tab and is not left on disk.
//
// Nothing is sent with a missing or refused token: /healthz (public) says whether a token is
// needed, and until one is entered, and after a 401 or a 429, every request is held (a poll with
// a wrong token would only spend the address's budget of wrong tokens and lock it, and every other
// client on it, out). The login page stays up, saying why once, until a token works.
const listeners = new Set();

export const session = {
  token: sessionStorage.getItem('punctual.token') ?? '',
  /** True until a token is known to work (or none is needed). */
  held: true,
  heldUntil: 0,
  /** Why the login page is up; '' while signed in. */
  why: '',
  role: undefined,
  name: undefined,
  ready: false,
};

/** Calls `listener` after every change of the session (sign in, sign out, a refused token). */
export function subscribe(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function changed() {
  for (const listener of listeners) listener();
}

/** A request not sent: no token, or a refused one. */
export class Held extends Error {}

/** Holds every request and shows the login page, saying `why`. */
export function askForToken(why) {
  session.held = true;
  session.why = why;
  session.ready = true;
  changed();
}

const RANKS = { read: 0, write: 1, admin: 2 };

/** Whether this token's role allows what `needed` allows (unknown: not yet). */
export const may = (needed) => session.role !== undefined && RANKS[session.role] >= RANKS[needed];

export async function api(method, path, body) {
  if (session.held || Date.now() < session.heldUntil) throw new Held(session.why || 'waiting for a token');
  const headers = session.token === '' ? {} : { authorization: `Bearer ${session.token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (response.status === 401) {
    askForToken(session.token === '' ? 'this punctual needs its API token' : 'that token is not known here: check it and enter it again');
    throw new Held(session.why);
  }
  if (response.status === 429) {
    const seconds = Number(response.headers.get('retry-after') ?? '60');
    session.heldUntil = Date.now() + seconds * 1000;
    askForToken(
      `too many wrong tokens from this address: every request from it is refused for ${seconds} s; enter the right token, it is tried after that`,
    );
    throw new Held(session.why);
  }
  const answer = response.status === 204 ? {} : await response.json();
  if (response.status === 403) {
    throw Object.assign(new Error(`not with this token's role (${session.role ?? '?'}): ${answer.message ?? ''}`), { status: 403 });
  }
  if (!response.ok) throw Object.assign(new Error(answer.message ?? `${response.status}`), { status: response.status, answer });
  return answer;
}

/** Who the token is, before anything renders, so no button shows that the role may not use. */
async function loadRole() {
  const who = await api('GET', '/auth/whoami');
  session.role = who.role;
  session.name = who.name;
  session.why = '';
  changed();
}

/** Whether the API asks for a token, from the public /healthz: no token is spent to find out. */
export async function start() {
  let auth = true;
  try {
    auth = (await (await fetch('/healthz')).json()).auth !== false;
  } catch {
    // not known: ask, rather than poll without a token
  }
  if (auth && session.token === '') return askForToken('this punctual needs its API token');
  session.held = false;
  session.ready = true;
  try {
    await loadRole();
  } catch {
    // a refused token: askForToken has said why
  }
}

export function signIn(token) {
  session.token = token;
  sessionStorage.setItem('punctual.token', token);
  const wait = Math.max(0, session.heldUntil - Date.now());
  // Locked out for wrong tokens: the form keeps the token and says when it is tried, not nothing.
  session.why = wait > 0 ? `too many wrong tokens from this address: this token is tried in ${Math.ceil(wait / 1000)} s, keep the page open` : '';
  changed();
  setTimeout(() => {
    session.held = false;
    loadRole().catch(() => {});
  }, wait);
}

export function signOut() {
  session.token = '';
  session.role = undefined;
  session.name = undefined;
  sessionStorage.removeItem('punctual.token');
  askForToken('signed out');
}
