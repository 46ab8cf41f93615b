/**
 * The CLI's way to the running service: its HTTP API, where PUNCTUAL_URL says, else at the HOST
 * and PORT the service reads from the same environment, with API_TOKEN. Changes made this way
 * go through the service (its checks, its timers, its audit trail), as any client's do.
 */
export class CliError extends Error {
  override name = 'CliError';
}

/** Where the service listens, as `npm start` with this environment would listen. */
export function serviceUrl(env: NodeJS.ProcessEnv): string {
  const url = env.PUNCTUAL_URL?.trim();
  if (url !== undefined && url !== '') return url.replace(/\/+$/, '');
  const host = env.HOST?.trim() || '127.0.0.1';
  const wildcard = host === '0.0.0.0' || host === '::' || host === '[::]';
  const reachable = wildcard ? '127.0.0.1' : host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return `http://${reachable}:${env.PORT?.trim() || '3000'}`;
}

export class Api {
  readonly base: string;
  readonly #token: string | undefined;

  constructor(env: NodeJS.ProcessEnv) {
    this.base = serviceUrl(env);
    this.#token = env.API_TOKEN?.trim() || undefined;
  }

  /** The answer's status and body; a refusal (4xx, 5xx) is a CliError with the API's message. */
  /** The answer; a 4xx or 5xx throws a CliError naming it, but for the statuses in `accept`. */
  async call<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    accept: readonly number[] = [],
  ): Promise<{ status: number; body: T }> {
    let response: Response;
    try {
      response = await fetch(`${this.base}${path}`, {
        method,
        headers: {
          ...(this.#token === undefined ? {} : { authorization: `Bearer ${this.#token}` }),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw new CliError(`punctual does not answer at ${this.base}: start it (punctual start), or set PUNCTUAL_URL (or PORT)`);
    }
    const text = await response.text();
    const parsed = text === '' ? undefined : (JSON.parse(text) as T & { message?: string });
    if (response.status >= 400 && !accept.includes(response.status)) {
      const message = (parsed as { message?: string } | undefined)?.message ?? response.statusText;
      throw new CliError(`${method} ${path} answered ${response.status}: ${message}`);
    }
    return { status: response.status, body: parsed as T };
  }
}
