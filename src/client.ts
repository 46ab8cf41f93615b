/**
 * A typed client for punctual's HTTP API: `import { PunctualClient } from 'punctual'`.
 * It has no dependencies (global fetch) and its types come from the schemas the server
 * validates with, so the two cannot drift apart.
 *
 *   const punctual = new PunctualClient({ baseUrl: 'http://127.0.0.1:3000', token: process.env.PUNCTUAL_TOKEN });
 *   await punctual.create({ type: 'close_order', payload: { orderSn: 'SN123' }, delayMs: 30 * 60_000, key: 'close_order:SN123' });
 *   await punctual.cancelByKey('close_order:SN123'); // the order was paid
 */
import type { CreateTaskBody, RescheduleBody, Summary, TaskJson } from './http/schemas.js';
import type { ClusterView } from './cluster/view.js';

export type Task = TaskJson;
export type CreateTask = CreateTaskBody;
export type Reschedule = RescheduleBody;
export type { Summary };
export type { ClusterView } from './cluster/view.js';

export interface PunctualClientOptions {
  /** Where punctual listens, e.g. http://127.0.0.1:3000. */
  baseUrl: string;
  /** API_TOKEN or a token with a role (API_TOKENS_READ/_WRITE/_ADMIN), when the service has tokens. */
  token?: string;
  /** Give up on a request after this long (default 10 s). */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/** A 4xx or 5xx answer: Fastify's error shape, and for a 409 the task as it is now. */
export class PunctualError extends Error {
  override name = 'PunctualError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly task?: Task,
  ) {
    super(message);
  }
}

export class PunctualClient {
  readonly #baseUrl: string;
  readonly #headers: Record<string, string>;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;

  constructor(options: PunctualClientOptions) {
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#headers = options.token === undefined ? {} : { authorization: `Bearer ${options.token}` };
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#fetch = options.fetch ?? fetch;
  }

  /**
   * Schedules a task. `created` is false when `key` named an existing task with the same content
   * (a retried create): that task comes back. A key taken by other content throws a 409.
   */
  async create(task: CreateTask): Promise<{ task: Task; created: boolean }> {
    const { status, body } = await this.#call<Task>('POST', '/tasks', task);
    return { task: body, created: status === 201 };
  }

  get(id: number): Promise<Task> {
    return this.#body('GET', `/tasks/${id}`);
  }

  getByKey(key: string): Promise<Task> {
    return this.#body('GET', `/tasks/by-key/${encodeURIComponent(key)}`);
  }

  /** Cancels a pending task (409 if it is not pending any more). */
  cancel(id: number): Promise<Task> {
    return this.#body('POST', `/tasks/${id}/cancel`);
  }

  /** Cancels by key: what a shop does when the order is paid. A recurring series stops. */
  cancelByKey(key: string): Promise<Task> {
    return this.#body('POST', `/tasks/by-key/${encodeURIComponent(key)}/cancel`);
  }

  reschedule(id: number, to: Reschedule): Promise<Task> {
    return this.#body('POST', `/tasks/${id}/reschedule`, to);
  }

  /** Runs a failed task again, now or at the time given. */
  retry(id: number, at: Reschedule = {}): Promise<Task> {
    return this.#body('POST', `/tasks/${id}/retry`, at);
  }

  /** One page of pending tasks, soonest first. */
  pending(query: { type?: string; limit?: number; cursor?: string } = {}): Promise<{ tasks: Task[]; nextCursor: string | null }> {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) if (value !== undefined) search.set(name, String(value));
    return this.#body('GET', `/tasks/pending${search.size > 0 ? `?${search}` : ''}`);
  }

  /** Every pending task, soonest first, a page at a time. */
  async *allPending(query: { type?: string; pageSize?: number } = {}): AsyncGenerator<Task> {
    let cursor: string | undefined;
    do {
      const page = await this.pending({ type: query.type, limit: query.pageSize ?? 500, cursor });
      yield* page.tasks;
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** Every pending task, a page (one request) at a time, soonest first. */
  async *pendingPages(query: { type?: string; pageSize?: number } = {}): AsyncGenerator<Task[]> {
    let cursor: string | undefined;
    do {
      const page = await this.pending({ type: query.type, limit: query.pageSize ?? 500, cursor });
      if (page.tasks.length > 0) yield page.tasks;
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** The latest tasks to finish with `status`, newest first. */
  async recent(status: 'done' | 'failed' | 'skipped' | 'cancelled' = 'done', limit = 50): Promise<Task[]> {
    return (await this.#body<{ tasks: Task[] }>('GET', `/tasks/recent?status=${status}&limit=${limit}`)).tasks;
  }

  summary(): Promise<Summary> {
    return this.#body('GET', '/tasks/summary');
  }

  /** The role of this client's token: read, write or admin (a wrong role's call is a 403). */
  async role(): Promise<'read' | 'write' | 'admin'> {
    return (await this.#body<{ role: 'read' | 'write' | 'admin' }>('GET', '/auth/whoami')).role;
  }

  /** True when the service has armed its timers and its database answers. */
  async ready(): Promise<boolean> {
    try {
      await this.#call('GET', '/readyz');
      return true;
    } catch (error) {
      if (error instanceof PunctualError && error.status === 503) return false;
      throw error;
    }
  }

  /** True when the process answers at all (/healthz). */
  async healthy(): Promise<boolean> {
    return (await this.#body<{ status: string }>('GET', '/healthz')).status === 'ok';
  }

  /** The processes sharing the tasks (SHARDING=on) and how many of the 256 shards each holds. */
  cluster(): Promise<ClusterView> {
    return this.#body('GET', '/cluster');
  }

  /** The Prometheus metrics, as text. */
  async metrics(): Promise<string> {
    return (await this.#call<string>('GET', '/metrics', undefined, 'text')).body;
  }

  async #body<T>(method: string, path: string, body?: unknown): Promise<T> {
    return (await this.#call<T>(method, path, body)).body;
  }

  async #call<T>(method: string, path: string, body?: unknown, as: 'json' | 'text' = 'json'): Promise<{ status: number; body: T }> {
    const response = await this.#fetch(`${this.#baseUrl}${path}`, {
      method,
      headers: { ...this.#headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(this.#timeoutMs),
    });
    const text = await response.text();
    if (as === 'text' && response.ok) return { status: response.status, body: text as T };
    const parsed = text === '' ? undefined : JSON.parse(text);
    if (!response.ok) {
      const error = (parsed ?? {}) as { code?: string; message?: string; task?: Task };
      throw new PunctualError(
        response.status,
        error.code ?? 'UNKNOWN',
        error.message ?? `punctual answered ${response.status}`,
        error.task,
      );
    }
    return { status: response.status, body: parsed as T };
  }
}
