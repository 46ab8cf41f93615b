/**
 * A typed client for punctual's HTTP API: `import { PunctualClient } from '@punctual/client'`.
 * It calls the API with the global fetch and nothing else; its types are derived from the
 * contract's schemas (src/contract), the ones the server validates and serializes with, so the
 * two cannot drift apart. The contract imports nothing but typebox, so this package carries
 * nothing of the server.
 *
 *   const punctual = new PunctualClient({ baseUrl: 'http://127.0.0.1:3000', token: process.env.PUNCTUAL_TOKEN });
 *   await punctual.create({ type: 'close_order', payload: { orderSn: 'SN123' }, delayMs: 30 * 60_000, key: 'close_order:SN123' });
 *   await punctual.cancelByKey('close_order:SN123'); // the order was paid
 *
 * A pull worker (a worker type's tasks, run in the shop's own process):
 *
 *   await punctual.work(['reset_membership'], async (task) => { await resetMembership(task.payload) }, { signal });
 *
 * A webhook receiver checks a call with verifyWebhook (webhook.ts).
 */
import type {
  AuditPage,
  AuditQuery,
  BatchResult,
  BulkCancelBody,
  BulkDeleteBody,
  BulkRescheduleBody,
  BulkResult,
  BulkRetryBody,
  ClusterJson,
  ClusterMember,
  CreateTaskBody,
  Health,
  LimitsBody,
  ListPage,
  ListQuery,
  PendingPage,
  PendingQuery,
  RecentPage,
  RecentQuery,
  RecentRunsJson,
  RescheduleBody,
  Role,
  RunsPage,
  LastHourJson,
  StatusCounts,
  CountsQuery,
  Summary,
  TaskJson,
  TypeJson,
  TypeList,
  UpcomingLoadJson,
  WhoAmI,
  LeaseBody,
  LeaseAnswer,
  LeasedTaskJson,
  AckManyAnswer,
  WorkersJson,
  TestClockJson,
  SearchPage,
} from '../../../src/contract/index.js';

export type Task = TaskJson;
export type CreateTask = CreateTaskBody;
export type Reschedule = RescheduleBody;
export type { Role, Summary };
/** A webhook receiver's check that a call is punctual's (docs/handlers.md). */
export { verifyWebhook, canonicalWebhookUrl, type WebhookCall, type WebhookKeys } from './webhook.js';
/** A shop's own handlers, for a module punctual loads (HANDLERS) or createPunctual({ handlers }). */
export { defineHandler, PermanentFailure, HANDLER_TYPE_PATTERN } from '../../../src/contract/index.js';
import { PermanentFailure } from '../../../src/contract/index.js';
export type {
  DatabaseHandlerDefinition,
  DatabaseBatchRun,
  DatabaseRun,
  HandlerDefinition,
  HandlerLog,
  HandlerTask,
  OutsideHandlerDefinition,
  OutsideRun,
  QueryFunction,
} from '../../../src/contract/index.js';
/** A task type: its pause, its limits, and what runs and waits. */
export type TaskType = TypeJson;
/** A change of limits: a field left out is kept, null clears it. */
export type TypeLimits = LimitsBody;
/** One answer per item of createMany, in order: the status `create` would have met, with the task or the error. */
export type BatchAnswer = BatchResult;
/** Which pending tasks a bulk change selects: exactly one of tag, keyPrefix, type, ids. */
export type BulkSelector = BulkCancelBody;
/** Which failed tasks a bulk retry selects: exactly one of tag, keyPrefix, type, ids. */
export type BulkRetrySelector = BulkRetryBody;
/** What list() shows: one status, filters, a page by offset. */
export type ListSelection = ListQuery;
export type TaskListPage = ListPage;
/** What search() finds: the tasks, and how many tasks carry the question as a tag (all of them). */
export type SearchAnswer = SearchPage;
export type CountsSelection = CountsQuery;
export type TaskCounts = StatusCounts;
export type BulkReschedule = BulkRescheduleBody;
export type BulkCounts = BulkResult;
/** What pending() may select and how much of it: a type, a tag or a key prefix, a page size, the cursor of the page before. */
export type PendingSelection = PendingQuery;
/** The processes sharing the tasks and the shards each holds. */
export type ClusterView = ClusterJson;
export type { ClusterMember };
/** Pending tasks due per minute over the next hour and per hour over the next 7 days, by type. */
export type UpcomingLoad = UpcomingLoadJson;
/** The answering process's runs over the last hour, per 10 s. */
export type RecentRuns = RecentRunsJson;
/** A page of a task's runs, newest first. */
export type TaskRuns = RunsPage;
/** The last hour's runs of the whole fleet, from the run history. */
export type LastHour = LastHourJson;
/** Which finished tasks a bulk delete takes: a status, and exactly one of tag, keyPrefix, type, ids. */
export type BulkDeleteSelector = BulkDeleteBody;
/** A page of the audit trail, newest first. */
export type AuditTrail = AuditPage;
/** What ackAll answers: one result per task, and how many were done. */
export type AckAllAnswer = AckManyAnswer;
/** What audit() may select: actor, action, target, since, until, limit, cursor. */
export type AuditSelection = AuditQuery;
/** The statuses recent() can list. */
export type FinishedStatus = NonNullable<RecentQuery['status']>;

/** A task leased to this worker: its payload, attempt, idempotency key and lease token. */
/** The test clock's time, and after a move what ran (a service started with --test-clock). */
export type TestClock = TestClockJson;
export type LeasedTask = LeasedTaskJson;
export type LeaseRequest = LeaseBody;

export interface WorkOptions {
  /** Stops the loop: between tasks (the task at hand is finished and settled first), and a waiting lease at once. */
  signal?: AbortSignal;
  /** How long each task is leased (default 30 s); the lease is extended every third of it while the callback runs. */
  leaseMs?: number;
  /** How long one lease request waits for a task (default 25 s, at most 30 s). */
  waitMs?: number;
  /** Called with an error the loop met (a lease or settle that failed); the loop goes on after a pause. */
  onError?: (error: unknown) => void;
}

export interface PunctualClientOptions {
  /** Where punctual listens, e.g. http://127.0.0.1:3000. */
  baseUrl: string;
  /** API_TOKEN or a token with a role (API_TOKENS_READ/_WRITE/_ADMIN), when the service has tokens. */
  token?: string;
  /** Give up on a request after this long (default 10 s). */
  timeoutMs?: number;
  fetch?: typeof fetch;
  /**
   * The caller's trace context for each create, so the task's runs join the caller's trace. With
   * OpenTelemetry: `() => { const headers = {}; propagation.inject(context.active(), headers); return headers; }`.
   */
  traceContext?: () => TraceContextHeaders | undefined;
}

/** W3C Trace Context headers: what a create carries in, and what a leased task carries out. */
export interface TraceContextHeaders {
  traceparent?: string;
  tracestate?: string;
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

/** `?name=value&…` of the fields given, or nothing. */
function queryOf(query: Record<string, string | number | boolean | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined) search.set(name, String(value));
  return search.size > 0 ? `?${search}` : '';
}

export class PunctualClient {
  readonly #baseUrl: string;
  readonly #headers: Record<string, string>;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;
  readonly #traceContext: (() => TraceContextHeaders | undefined) | undefined;

  constructor(options: PunctualClientOptions) {
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#headers = options.token === undefined ? {} : { authorization: `Bearer ${options.token}` };
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#fetch = options.fetch ?? fetch;
    this.#traceContext = options.traceContext;
  }

  /** The trace headers of a create: the call's own, else the client's traceContext's. */
  #traced(given: TraceContextHeaders | undefined): Record<string, string> {
    const context = given ?? this.#traceContext?.();
    const headers: Record<string, string> = {};
    // An empty value is left out (a propagator with no active span); the server validates the rest.
    if (context?.traceparent) headers.traceparent = context.traceparent;
    if (context?.tracestate) headers.tracestate = context.tracestate;
    return headers;
  }

  /**
   * Schedules a task. `created` is false when `key` named an existing task with the same content
   * (a retried create): that task comes back. A key taken by other content throws a 409.
   */
  async create(task: CreateTask, options: { traceContext?: TraceContextHeaders } = {}): Promise<{ task: Task; created: boolean }> {
    const { status, body } = await this.#call<Task>('POST', '/tasks', task, 'json', undefined, this.#traced(options.traceContext));
    return { task: body, created: status === 201 };
  }

  /**
   * Schedules up to 1,000 tasks in one request. Each item is answered as `create` would answer it
   * (201, 200, 409 or 400 with the message), in order; a bad item does not refuse the others.
   */
  async createMany(tasks: CreateTask[], options: { traceContext?: TraceContextHeaders } = {}): Promise<BatchAnswer> {
    return (await this.#call<BatchAnswer>('POST', '/tasks/batch', { tasks }, 'json', undefined, this.#traced(options.traceContext))).body;
  }

  /** Cancels every pending task with a tag, a key prefix or a type (admin role); repeating it is harmless. */
  bulkCancel(selector: BulkSelector): Promise<BulkCounts> {
    return this.#body('POST', '/tasks/bulk/cancel', selector);
  }

  /** Runs again now every failed task with a tag, a key prefix, a type, or among ids (admin role); repeating it is harmless. */
  bulkRetry(selector: BulkRetrySelector): Promise<BulkCounts> {
    return this.#body('POST', '/tasks/bulk/retry', selector);
  }

  /** Deletes every task in a finished status with a tag, a key prefix, a type, or among ids, with their runs (admin role). */
  bulkDelete(selector: BulkDeleteSelector): Promise<BulkCounts> {
    return this.#body('POST', '/tasks/bulk/delete', selector);
  }

  /** The tasks in one status (default pending), filtered, a page by offset, with the view's total. */
  list(query: ListSelection = {}): Promise<TaskListPage> {
    return this.#body('GET', `/tasks${queryOf(query)}`);
  }

  /** How many tasks are in each status, with the filters of list(). */
  counts(query: CountsSelection = {}): Promise<TaskCounts> {
    return this.#body('GET', `/tasks/counts${queryOf(query)}`);
  }

  /**
   * Moves every pending task selected to `runAt`, or by `shiftMs` (with a `requestId`, so a
   * repeat moves nothing twice); admin role.
   */
  bulkReschedule(change: BulkReschedule): Promise<BulkCounts> {
    return this.#body('POST', '/tasks/bulk/reschedule', change);
  }

  get(id: number): Promise<Task> {
    return this.#body('GET', `/tasks/${id}`);
  }

  /** Finds tasks by id, key, a key's start, its last part after a colon (`SN104500`) or a tag (up to `limit`, default 20). */
  search(q: string, options: { limit?: number } = {}): Promise<SearchAnswer> {
    return this.#body('GET', `/tasks/search${queryOf({ q, limit: options.limit })}`);
  }

  /** Releases a running task whose lease ran out (admin role; 409 while its lease holds): pending again, or failed on its last attempt. */
  releaseLease(id: number): Promise<Task> {
    return this.#body('POST', `/tasks/${id}/release-lease`);
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

  /** Replaces a pending task's payload (409 if it is not pending any more). */
  editPayload(id: number, payload: unknown): Promise<Task> {
    return this.#body('PUT', `/tasks/${id}/payload`, { payload });
  }

  /** Deletes a task that is not running, with its runs; answers it as it was. */
  delete(id: number): Promise<Task> {
    return this.#body('DELETE', `/tasks/${id}`);
  }

  /** The worker types with their leased and pending tasks, and the lease requests waiting in the answering process. */
  workers(): Promise<WorkersJson> {
    return this.#body('GET', '/workers');
  }

  /** The last hour's runs of the whole fleet by outcome, with lateness p50 and p99, from the run history. */
  lastHour(): Promise<LastHour> {
    return this.#body('GET', '/runs/last-hour');
  }

  /** The test clock's time (a service started with `--test-clock` or TEST_CLOCK=on; a 404 PunctualError otherwise). */
  clock(): Promise<TestClock> {
    return this.#body('GET', '/test/clock');
  }

  /**
   * Moves the test clock `ms` forward. Resolves once every task due on the way has run, in due
   * order (retries whose backoff lands inside too); `settled` false names the ones still running
   * after `waitMs` (default 10 s).
   */
  advance(ms: number, options: { waitMs?: number } = {}): Promise<TestClock> {
    return this.#moveClock({ advanceMs: ms, ...options });
  }

  /** Moves the test clock to `at` (a Date, epoch ms, ISO-8601 with an offset, or a naive local time read in `timezone`), as advance does. */
  setTime(at: Date | number | string, options: { waitMs?: number; timezone?: string } = {}): Promise<TestClock> {
    return this.#moveClock({ to: at instanceof Date ? at.getTime() : at, ...options });
  }

  async #moveClock(body: { advanceMs?: number; to?: number | string; waitMs?: number; timezone?: string }): Promise<TestClock> {
    const signal = AbortSignal.timeout(this.#timeoutMs + (body.waitMs ?? 10_000));
    return (await this.#call<TestClock>('POST', '/test/clock', body, 'json', signal)).body;
  }

  /** Runs a failed task again, now or at the time given. */
  retry(id: number, at: Reschedule = {}): Promise<Task> {
    return this.#body('POST', `/tasks/${id}/retry`, at);
  }

  /** A task's runs (one per attempt), newest first; `cursor` is a previous page's nextCursor. */
  runs(id: number, page: { limit?: number; cursor?: string } = {}): Promise<TaskRuns> {
    return this.#body('GET', `/tasks/${id}/runs${query(page)}`);
  }

  /** The audit trail (admin): every change made through the API, by whom, newest first. */
  audit(selection: AuditSelection = {}): Promise<AuditTrail> {
    return this.#body('GET', `/audit${query(selection)}`);
  }

  /** One page of pending tasks, soonest first. */
  pending(query: PendingSelection = {}): Promise<PendingPage> {
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
  async recent(status: FinishedStatus = 'done', limit = 50): Promise<Task[]> {
    return (await this.#body<RecentPage>('GET', `/tasks/recent?status=${status}&limit=${limit}`)).tasks;
  }

  summary(): Promise<Summary> {
    return this.#body('GET', '/tasks/summary');
  }

  /** Every known task type with its pause, limits, runs and waiting tasks. */
  async types(): Promise<TaskType[]> {
    return (await this.#body<TypeList>('GET', '/types')).types;
  }

  /** Sets a type's run limits (admin); a field left out is kept, null clears it. Limits hold for every process together. */
  setLimits(type: string, limits: TypeLimits): Promise<TaskType> {
    return this.#body('PUT', `/types/${encodeURIComponent(type)}/limits`, limits);
  }

  /** Pauses a type (admin): its due tasks wait, pending, until it is resumed. */
  pause(type: string): Promise<TaskType> {
    return this.#body('POST', `/types/${encodeURIComponent(type)}/pause`);
  }

  /** Resumes a type (admin): what waited runs in runAt order. */
  resume(type: string): Promise<TaskType> {
    return this.#body('POST', `/types/${encodeURIComponent(type)}/resume`);
  }

  /** The role of this client's token: read, write or admin (a wrong role's call is a 403). */
  async role(): Promise<Role> {
    return (await this.#body<WhoAmI>('GET', '/auth/whoami')).role;
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
    return (await this.#body<Health>('GET', '/healthz')).status === 'ok';
  }

  /** The processes sharing the tasks (SHARDING=on) and how many of the 256 shards each holds. */
  cluster(): Promise<ClusterView> {
    return this.#body('GET', '/cluster');
  }

  /** Pending tasks due per minute over the next hour and per hour over the next 7 days, by type (the whole fleet's). */
  upcomingLoad(): Promise<UpcomingLoad> {
    return this.#body('GET', '/charts/upcoming');
  }

  /** The answering process's runs over the last hour, per 10 s: by outcome, and lateness p50 and p99. */
  recentRuns(): Promise<RecentRuns> {
    return this.#body('GET', '/charts/recent');
  }

  /** The Prometheus metrics, as text. */
  async metrics(): Promise<string> {
    return (await this.#call<string>('GET', '/metrics', undefined, 'text')).body;
  }

  // ── pull workers (worker role) ────────────────────────────────────────────────────────────

  /**
   * Leases due tasks of worker types (at most `max`); with `waitMs`, the request waits until one
   * falls due or waitMs passes (then none). `signal` gives up the wait.
   */
  async lease(request: LeaseRequest, signal?: AbortSignal): Promise<LeasedTask[]> {
    const timeout = AbortSignal.timeout(this.#timeoutMs + (request.waitMs ?? 0));
    const body = await this.#body<LeaseAnswer>(
      'POST',
      '/workers/lease',
      request,
      signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
    );
    return body.tasks;
  }

  /** The leased task is done (409 when the lease is not this token's any more). */
  ack(task: Pick<LeasedTask, 'id' | 'leaseToken'>): Promise<Task> {
    return this.#body('POST', `/tasks/${task.id}/ack`, { leaseToken: task.leaseToken });
  }

  /**
   * Several leased tasks are done, in one request (up to 1,000; acks commit in groups of up to 200): one
   * result per task, in order, 200 done or 404/409 as `ack` would throw; nothing else is written.
   */
  ackAll(tasks: readonly Pick<LeasedTask, 'id' | 'leaseToken'>[]): Promise<AckAllAnswer> {
    return this.#body('POST', '/workers/ack', { acks: tasks.map((task) => ({ id: task.id, leaseToken: task.leaseToken })) });
  }

  /** The leased task failed: retried with backoff (or at `retryAt`), or failed for good when `permanent`. */
  nack(
    task: Pick<LeasedTask, 'id' | 'leaseToken'>,
    error: string,
    options: { retryAt?: string | number; permanent?: boolean } = {},
  ): Promise<Task> {
    return this.#body('POST', `/tasks/${task.id}/nack`, { leaseToken: task.leaseToken, error: error.slice(0, 2000), ...options });
  }

  /** The leased task needs longer: its lease runs `leaseMs` from now. */
  extend(task: Pick<LeasedTask, 'id' | 'leaseToken'>, leaseMs: number): Promise<Task> {
    return this.#body('POST', `/tasks/${task.id}/extend`, { leaseToken: task.leaseToken, leaseMs });
  }

  /**
   * The worker loop: leases one task of `types` at a time, waiting for one (long poll), and runs
   * `fn` on it. A return acks the task; a throw nacks it with the error's message (retried with
   * backoff), a PermanentFailure without a retry. The lease is extended while `fn` runs. The loop
   * ends when `signal` aborts, between tasks; resolves then.
   */
  async work(types: string[], fn: (task: LeasedTask) => unknown, options: WorkOptions = {}): Promise<void> {
    const { signal, leaseMs = 30_000, waitMs = 25_000, onError } = options;
    const stopped = () => signal?.aborted === true;
    while (!stopped()) {
      let tasks: LeasedTask[];
      try {
        tasks = await this.lease({ types, max: 1, leaseMs, waitMs }, signal);
      } catch (error) {
        if (stopped()) return;
        onError?.(error);
        await pause(1000, signal);
        continue;
      }
      for (const task of tasks) await this.#runOne(task, fn, leaseMs, onError);
    }
  }

  async #runOne(task: LeasedTask, fn: (task: LeasedTask) => unknown, leaseMs: number, onError?: (error: unknown) => void): Promise<void> {
    const extender = setInterval(
      () => void this.extend(task, leaseMs).catch((error: unknown) => onError?.(error)),
      Math.max(500, Math.floor(leaseMs / 3)),
    );
    let failure: unknown;
    let failed = false;
    try {
      await fn(task);
    } catch (error) {
      failed = true;
      failure = error;
    } finally {
      clearInterval(extender);
    }
    try {
      if (!failed) await this.ack(task);
      else {
        const message = failure instanceof Error ? failure.message : String(failure);
        await this.nack(task, message === '' ? 'failed' : message, { permanent: failure instanceof PermanentFailure });
      }
    } catch (error) {
      // The lease was lost (it ran out, another worker has the task now) or punctual is away: the
      // task comes back when its lease runs out, at least once.
      onError?.(error);
    }
  }

  async #body<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    return (await this.#call<T>(method, path, body, 'json', signal)).body;
  }

  async #call<T>(
    method: string,
    path: string,
    body?: unknown,
    as: 'json' | 'text' = 'json',
    signal: AbortSignal = AbortSignal.timeout(this.#timeoutMs),
    extraHeaders: Record<string, string> = {},
  ): Promise<{ status: number; body: T }> {
    const response = await this.#fetch(`${this.#baseUrl}${path}`, {
      method,
      headers: { ...this.#headers, ...extraHeaders, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
    const text = await response.text();
    if (as === 'text' && response.ok) return { status: response.status, body: text as T };
    const parsed: unknown = text === '' ? undefined : JSON.parse(text);
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

/** Waits `ms`, or less when `signal` aborts. */
function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

/** `?name=value&…` of the fields given, or nothing. */
function query(fields: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(fields)) if (value !== undefined) search.set(name, String(value));
  return search.size > 0 ? `?${search}` : '';
}
