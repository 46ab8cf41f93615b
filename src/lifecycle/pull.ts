/**
 * The transitions of a pull lease: a worker type's due tasks leased to a pull worker (running, one
 * attempt counted, `lease_owner` = the lease token, `lease_until`), and the worker's ack (done),
 * nack (retried with backoff or at the worker's time, or failed for good) and extend. It is an
 * outside run's lease, so the lease recovery applies as it is; a lease request first recovers the
 * expired leases of its own types, so a worker that died hands its task on at once, not at the
 * next reconcile. Invariant 13: every settle names the lease token and expects the lease held; a
 * stale or foreign token writes nothing. Invariant 9: the claim locks with SKIP LOCKED and writes
 * conditionally, so any process may serve a lease, with SHARDING=on too. Each settle (ack, nack,
 * an expired lease) writes its run row in its own transaction, held back to travel with COMMIT.
 * See docs/workers.md.
 */
import { randomUUID } from 'node:crypto';
import { Counter, type Registry } from 'prom-client';
import type { Clock } from '../time/clock.js';
import type { PullFailure, PullStore } from '../store/pulls.js';
import type { TaskStore } from '../store/task-store.js';
import { MAX_ERROR_LENGTH, type Task } from '../store/task-types.js';
import { retryAt, type BackoffPolicy } from './backoff.js';
import { arm, type EffectSink, type TimerEffect } from './effects.js';
import { leaseHolder, pullRunOf, recordRuns, type RunRecorder } from './history.js';
import { expectAll } from './expect.js';
import { nextOccurrences } from './recur.js';
import { EXPIRED_REASON, recoverLeases, skipLocked } from './repair.js';
import { notifyFailures, type FailureNotifier } from './notify.js';
import { Batcher, type Outcome } from '../util/batcher.js';

/** Expired leases recovered by one lease request at most (the reconcile recovers the rest). */
const RECOVER_AT_MOST = 100;
/** A type's expired leases are looked for at most this often (a lease request at 1,000/s must not pay for it each time). */
const RECOVER_EVERY_MS = 500;

export interface PullLifecycleOptions {
  store: TaskStore;
  pulls: PullStore;
  clock: Clock;
  retry: BackoffPolicy;
  /** Where timer effects go after COMMIT (arming). */
  effects: EffectSink;
  /** Why a stored payload is refused, or undefined (the registry's check, again before a lease). */
  payloadProblem: (type: string, payload: unknown) => string | undefined;
  /** Where each settled lease's run row goes, in the settle's transaction; undefined: RUN_HISTORY=off. */
  runs?: RunRecorder;
  /** NOTIFY_URL: a lease that expires on its last attempt is told as any failure for good. */
  notify?: FailureNotifier;
  registry?: Registry;
}

export interface LeaseAsk {
  types: readonly string[];
  max: number;
  leaseMs: number;
  token: string;
}

/** How many more tasks of `type` may be leased now (its maxConcurrency, counted fleet-wide by `leasedOf`); undefined: no limit. */
export type LeaseRoom = (type: string, leasedOf: () => Promise<number>) => Promise<number | undefined>;

/** The answer to a settle: the task as it is after it, and whether this call wrote it. */
/**
 * A pull lease's token: `pull:` and a random UUID, made here only. A settle names one, or it is
 * refused before it reads anything: the other leases in lease_owner are processes' names (a
 * webhook in flight), which the run history shows, and a worker must never settle those.
 */
export function newPullToken(): string {
  // randomUUID draws from a buffer Node fills for many at once: one randomBytes each cost a claim a getrandom call.
  return `pull:${randomUUID()}`;
}

const PULL_TOKEN = /^pull:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Whether `token` is a pull lease's (newPullToken). */
export function isPullToken(token: string): boolean {
  return PULL_TOKEN.test(token);
}

export type SettleResult = { kind: 'settled'; task: Task } | { kind: 'stale'; task: Task } | { kind: 'missing' };

/** Acks that arrive together share one transaction (one commit), up to this many, this many at once. */
const ACK_BATCH = 200;
const ACKS_RUNNING = 4;

export class PullLifecycle {
  /** Group commit of acks: each is its own conditional UPDATE, their COMMIT is shared. */
  readonly #acks = new Batcher<{ id: number; token: string }, SettleResult>((acks) => this.#ackAll(acks), ACK_BATCH, ACKS_RUNNING);

  /** When each type's expired leases were last looked for. */
  readonly #recovered = new Map<string, number>();

  /** Transactions that committed a group of acks. */
  readonly #ackCommits: Counter | undefined;

  constructor(private readonly options: PullLifecycleOptions) {
    this.#ackCommits =
      options.registry === undefined
        ? undefined
        : new Counter({
            name: 'punctual_pull_ack_commits_total',
            help: "Transactions that committed pull workers' acks (acks that arrive together share one).",
            registers: [options.registry],
          });
  }

  #apply(effects: readonly TimerEffect[]): void {
    if (effects.length > 0) this.options.effects.apply(effects);
  }

  /**
   * One claim for several lease requests (the pull hub's waiting workers, oldest first): in one
   * transaction, the due tasks of each set of types are locked once (SKIP LOCKED) and handed out
   * in the asks' order, each ask up to its `max`; then one conditional UPDATE leases them all,
   * each row to its own ask's token and lease (it expects every row pending: invariant 13).
   * `more` names the types whose lock came back full: more of them may be due. A locked task past
   * its expireAfterMs is skipped as expired in the same transaction, never leased (`expired`):
   * the dispatcher never sees a worker type's task, so the claim that meets it ends it.
   * `upcoming` hears, as soon as each lock has answered (before the COMMIT), when the next task of
   * its types falls due after the claim's instant: the look ahead travels with the lock.
   */
  async leaseMany(
    asks: readonly LeaseAsk[],
    room?: LeaseRoom,
    upcoming?: (types: readonly string[], at: number) => void,
  ): Promise<{ leased: Task[][]; more: Set<string>; expired: Task[] }> {
    const { store, pulls, clock } = this.options;
    await this.#recoverExpired([...new Set(asks.flatMap((ask) => ask.types))]);
    const effects: TimerEffect[] = [];
    const answer = await pulls.transaction(async (conn) => {
      effects.length = 0;
      const now = clock.now();
      const left = new Map<string, number>();
      for (const type of new Set(asks.flatMap((ask) => ask.types))) {
        const max = await room?.(type, () => pulls.leasedOf(conn, type, now));
        if (max !== undefined) left.set(type, max);
      }
      const open = (type: string) => (left.get(type) ?? 1) > 0;
      // Asks with the same types share one lock, made for all of them at once.
      const groups = new Map<string, { types: string[]; asks: number[] }>();
      asks.forEach((ask, i) => {
        const types = [...new Set(ask.types)].filter(open).sort();
        if (types.length === 0) return;
        const key = JSON.stringify(types);
        const group = groups.get(key) ?? { types, asks: [] };
        group.asks.push(i);
        groups.set(key, group);
      });
      const leased: Task[][] = asks.map(() => []);
      const taken = new Set<number>();
      const refused = new Map<number, Task>();
      const expired = new Map<number, Task>();
      const more = new Set<string>();
      for (const group of groups.values()) {
        const limit = group.asks.reduce((sum, i) => sum + asks[i]!.max, 0);
        const { locked, next: nextDue } = await pulls.lockDue(conn, group.types, limit, now);
        if (nextDue !== undefined) upcoming?.(group.types, nextDue);
        if (locked.length >= limit) for (const type of group.types) more.add(type);
        let next = 0;
        for (const i of group.asks) {
          const ask = asks[i]!;
          while (leased[i]!.length < ask.max && next < locked.length) {
            const task = locked[next++]!;
            if (taken.has(task.id) || refused.has(task.id) || expired.has(task.id)) continue; // an earlier group's
            if (task.expireAfterMs !== null && now > task.requestedRunAt + task.expireAfterMs) {
              expired.set(task.id, task); // whatever held it (no worker asked, a pause), it is too late now
              continue;
            }
            if (this.options.payloadProblem(task.type, task.payload) !== undefined) {
              refused.set(task.id, task);
              continue;
            }
            const room = left.get(task.type);
            if (room !== undefined) {
              if (room <= 0) continue; // over its type's limit: it stays pending
              left.set(task.type, room - 1);
            }
            taken.add(task.id);
            leased[i]!.push(task);
          }
        }
      }
      for (const task of refused.values()) {
        const failure = { id: task.id, error: this.options.payloadProblem(task.type, task.payload)!, retryAt: null };
        expectAll('fail unrunnable', (await store.runs.failClaimed(conn, failure, task, now)) ? 1 : 0, 1);
        await notifyFailures(this.options.notify, conn, [{ task, attempt: task.attempts + 1, error: failure.error }], now);
      }
      effects.push(...(await nextOccurrences(store, conn, [...refused.values()], now)));
      effects.push(...(await skipLocked(store, conn, [...expired.values()], now, EXPIRED_REASON)));
      const rows = asks.flatMap((ask, i) => leased[i]!.map((task) => ({ id: task.id, token: ask.token, leaseUntil: now + ask.leaseMs })));
      expectAll('pull lease', await pulls.leaseRows(conn, rows, now), rows.length);
      return {
        leased: leased.map((tasks) => tasks.map((task) => ({ ...task, status: 'running' as const, attempts: task.attempts + 1 }))),
        more,
        expired: [...expired.values()],
      };
    });
    this.#apply(effects);
    return answer;
  }

  /** The one lease recovery (repair.ts), for the expired leases of `types`: pending again, or failed on their last attempt with their notice. */
  async #recoverExpired(types: readonly string[]): Promise<void> {
    const { store, pulls, clock } = this.options;
    const due = types.filter((type) => clock.now() - (this.#recovered.get(type) ?? Number.NEGATIVE_INFINITY) >= RECOVER_EVERY_MS);
    if (due.length === 0) return;
    for (const type of due) this.#recovered.set(type, clock.now());
    const ids = await pulls.expiredIds(due, clock.now(), RECOVER_AT_MOST);
    this.#apply((await recoverLeases(store, ids, clock.now(), this.options.runs, this.options.notify)).effects);
  }

  /**
   * The worker's ack: done while its lease is held; a recurring task's next occurrence with it.
   * Acks that arrive together commit together (a worker acks a leased batch at once).
   */
  ack(id: number, token: string): Promise<SettleResult> {
    return this.#acks.add({ id, token });
  }

  /**
   * One transaction for acks that came together: their rows locked and read, then one
   * conditional UPDATE per lease token (a worker acks the tasks of one lease), expecting exactly
   * the rows whose lease it found held (invariant 13: a row it did not find held is not written).
   */
  async #ackAll(acks: { id: number; token: string }[]): Promise<Outcome<SettleResult>[]> {
    const { store, pulls, clock } = this.options;
    const effects: TimerEffect[] = [];
    const results = await pulls.transaction(async (conn) => {
      effects.length = 0;
      const now = clock.now();
      const found = new Map((await pulls.lockByIds(conn, [...new Set(acks.map((ack) => ack.id))])).map((task) => [task.id, task]));
      const held = acks.map((ack) => {
        const task = found.get(ack.id);
        return (
          task !== undefined &&
          isPullToken(ack.token) &&
          task.status === 'running' &&
          task.leaseOwner === ack.token &&
          (task.leaseUntil ?? 0) >= now
        );
      });
      const byToken = new Map<string, Set<number>>();
      acks.forEach((ack, i) => {
        if (held[i]) byToken.set(ack.token, (byToken.get(ack.token) ?? new Set()).add(ack.id));
      });
      // A successful run is on record in its task's row, under the lease's digest (store/run-history.ts).
      const history = this.options.runs !== undefined;
      for (const [token, ids] of byToken) {
        expectAll('ack', await pulls.ackMany(conn, [...ids], token, now, history ? leaseHolder(token) : null), ids.size);
      }
      const finished = [...new Set(acks.filter((_, i) => held[i]).map((ack) => ack.id))].map((id) => found.get(id)!);
      effects.push(...(await nextOccurrences(store, conn, finished, now)));
      return acks.map((ack, i): SettleResult => {
        const task = found.get(ack.id);
        if (task === undefined) return { kind: 'missing' };
        if (!held[i]) return { kind: 'stale', task };
        return { kind: 'settled', task: { ...task, status: 'done', leaseOwner: null, leaseUntil: null, finishedAt: now, updatedAt: now } };
      });
    });
    this.#ackCommits?.inc();
    this.#apply(effects);
    return results.map((value) => ({ ok: true, value }));
  }

  /**
   * The worker's nack: pending again at `at` (the worker's time, else the backoff), or failed for
   * good when `permanent` or on its last attempt; `error` kept as the task's lastError.
   */
  async nack(id: number, token: string, error: string, options: { retryAt?: number; permanent?: boolean } = {}): Promise<SettleResult> {
    const { store, pulls, clock, retry } = this.options;
    const task = await store.reads.get(id);
    if (task === undefined) return { kind: 'missing' };
    if (!isPullToken(token)) return { kind: 'stale', task };
    const effects = await pulls.transaction(async (conn) => {
      const now = clock.now();
      // The attempt was counted by the lease: `task.attempts` is the attempt this lease runs.
      const last = task.attempts >= task.maxAttempts;
      const failure: PullFailure = {
        error,
        retryAt: options.permanent === true || last ? null : (options.retryAt ?? retryAt(retry, task.attempts, task.maxAttempts, now)),
      };
      if (failure.retryAt !== null) failure.retryAt = Math.max(failure.retryAt, now);
      const kept = error.slice(0, MAX_ERROR_LENGTH);
      if (!(await pulls.nack(conn, { id, token }, failure, kept, now))) return undefined;
      // `task` was read under this lease (the token is the lease's alone): its run, due at its runAt.
      await recordRuns(this.options.runs, conn, [pullRunOf(task, failure.retryAt === null ? 'failed' : 'retry', kept, token, now)]);
      if (failure.retryAt !== null) return [arm(id, failure.retryAt, task.priority, task.type)];
      await notifyFailures(this.options.notify, conn, [{ task, attempt: task.attempts, error: kept }], now);
      return nextOccurrences(store, conn, [task], now);
    });
    return this.#answer(id, effects);
  }

  /** The worker's extend: its lease runs `leaseMs` from now, while it is held. */
  async extend(id: number, token: string, leaseMs: number): Promise<SettleResult> {
    const { store, pulls, clock } = this.options;
    const now = clock.now();
    const extended = isPullToken(token) && (await pulls.extend({ id, token }, now + leaseMs, now));
    const task = await store.reads.get(id);
    if (task === undefined) return { kind: 'missing' };
    return { kind: extended ? 'settled' : 'stale', task };
  }

  async #answer(id: number, effects: TimerEffect[] | undefined): Promise<SettleResult> {
    if (effects !== undefined) this.#apply(effects);
    const task = await this.options.store.reads.get(id);
    if (task === undefined) return { kind: 'missing' };
    return { kind: effects === undefined ? 'stale' : 'settled', task };
  }
}
