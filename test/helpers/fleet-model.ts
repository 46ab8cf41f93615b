/**
 * The randomized model test of a fleet: three punctual processes (SHARDING=on) on one database,
 * driven through their HTTP APIs by a sequence of operations that fast-check draws from a seed,
 * each sent through a random process: creates due now, soon and later of four kinds of type
 * (close_order, a shop's database handler that writes a ledger row, webhook, a pull worker type),
 * pause and resume, limits set and cleared (maxConcurrency, ratePerSecond, groupBy), cancel,
 * reschedule, upsert (replace), kill -9 and restart of a process, and the loss of every database
 * connection the fleet holds. Then every type is resumed, and once the fleet has settled the
 * effects are held against the model:
 *
 * - every task ran exactly once (a ledger row per run, a receiver and a worker that count calls),
 *   or was cancelled as asked and ran never; a webhook or a pull lease cut by a kill -9 may run
 *   again (at least once), nothing else may;
 * - none ran before its runAt;
 * - none started while its type was paused (from the pause's answer + 1 s to the resume's request);
 * - the fleet never ran more webhooks of a group at once than its maxConcurrency, nor started
 *   more in a window than its ratePerSecond (from the change's answer + 1 s);
 * - no runnable task waited longer than 2 s: past its runAt, its type's resume (+1 s), a kill's
 *   shard takeover, a lost connection's back-off, for a webhook due by a kill its run lease's end
 *   (+1 s: the new owner's refill), or, for a limited type, what the limit forces (a group with
 *   room and a waiting task starts one within 2 s).
 *
 * Why fast-check and not a hand-written seeded loop: it draws, replays by seed and path, and holds
 * regression examples. No shrinking: each run starts real processes, and a shrink would rerun the
 * fleet hundreds of times; a failing run prints its seed, its operations and the command that
 * replays it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import mysql from 'mysql2/promise';
import { createTestDatabase, type TestDatabase } from './db.js';
import { startServer, waitFor, type ServerProcess } from './server.js';
import { createShop, insertOrders, makeOrders } from './shop.js';

export const TYPES = ['close_order', 'fleet_ledger', 'webhook', 'fleet_pull'] as const;
export type TaskType = (typeof TYPES)[number];
const PAUSABLE = TYPES;
const GROUPS = ['a', 'b'] as const;
/** How long the receiver holds a webhook call, by group: both well under the 1 s a change takes to be in force. */
const HOLD_MS = { a: 250, b: 60 } as const;
const LEASE_MS = 1500;
const WEBHOOK_TIMEOUT_MS = 2000;
/** A webhook run's lease: its timeout and the lease margin (src/dispatch/run-outside.ts). */
const RUN_LEASE_MS = WEBHOOK_TIMEOUT_MS + 30_000;
/**
 * The scheduler's refill (REFILL_INTERVAL_MS's default): the process that took a dead process's
 * shard recovers a run whose lease ran out at the first refill after the lease's end.
 */
const REFILL_MS = 1000;
/** The bound of the issue: no runnable task waits longer than this. */
export const WAIT_BOUND_MS = 2000;
/** A change through one process is in force in every process within this. */
const IN_FORCE_MS = 1000;
/** How long a kill -9 may keep a dead process's shards from the others (its lease, a round, the load). */
const TAKEOVER_MS = LEASE_MS + LEASE_MS / 3 + 1000;
/** A lost connection: the batch's back-off and the pool's reconnect. */
const RECONNECT_MS = 2000;
/** The receiver sees a start after COMMIT and a loopback call: rate windows are counted this much shorter. */
const RATE_LAG_MS = 250;

const HANDLERS = `export default [
  {
    type: 'fleet_ledger',
    effect: 'database',
    payload: { type: 'object', properties: { tag: { type: 'string' } }, required: ['tag'], additionalProperties: false },
    async run({ tx, payload }) {
      await tx.query('INSERT INTO fleet_effects (tag, at) VALUES (?, NOW(3))', [payload.tag]);
      return 'written';
    },
  },
];
`;

// ── the operations ───────────────────────────────────────────────────────────────────────────

export type Op =
  | { kind: 'create'; type: TaskType; due: 'now' | 'soon' | 'later'; via: number; group: 'a' | 'b'; keyed: boolean }
  | { kind: 'burst'; type: TaskType; due: 'now' | 'soon' | 'later'; count: number; group: 'a' | 'b' }
  | { kind: 'pause' | 'resume'; type: TaskType; via: number }
  | { kind: 'limits'; maxConcurrency: number | null; ratePerSecond: number | null; groupBy: 'group' | null; via: number }
  | { kind: 'cancel' | 'reschedule' | 'upsert'; target: number; delayMs: number; via: number }
  | { kind: 'kill'; via: number }
  | { kind: 'lose-connections' }
  | { kind: 'wait'; ms: number };

const via = fc.integer({ min: 0, max: 2 });

export const opArbitrary: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant('create' as const),
      type: fc.constantFrom(...TYPES),
      due: fc.constantFrom('now' as const, 'soon' as const, 'later' as const),
      via,
      group: fc.constantFrom(...GROUPS),
      keyed: fc.boolean(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('burst' as const),
      type: fc.constantFrom(...TYPES),
      due: fc.constantFrom('now' as const, 'soon' as const, 'later' as const),
      count: fc.integer({ min: 3, max: 10 }),
      group: fc.constantFrom(...GROUPS),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constantFrom('pause' as const, 'resume' as const), type: fc.constantFrom(...PAUSABLE), via }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('limits' as const),
      maxConcurrency: fc.constantFrom(null, 1, 2, 3),
      ratePerSecond: fc.constantFrom(null, null, 3, 6),
      groupBy: fc.constantFrom(null, 'group' as const),
      via,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constantFrom('cancel' as const, 'reschedule' as const, 'upsert' as const),
      target: fc.nat(),
      delayMs: fc.integer({ min: 0, max: 3000 }),
      via,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('kill' as const), via }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('lose-connections' as const) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('wait' as const), ms: fc.integer({ min: 50, max: 700 }) }) },
);

export const opsArbitrary = fc.array(opArbitrary, { minLength: 10, maxLength: 28 });

// ── what the run saw ─────────────────────────────────────────────────────────────────────────

interface ModelTask {
  tag: string;
  id: number;
  type: TaskType;
  group: 'a' | 'b';
  key?: string;
  cancelled: boolean;
}

interface Call {
  tag: string;
  group: string;
  start: number;
  end: number;
  /** The call's connection was cut (its process killed), not answered. */
  cut: boolean;
}

interface LimitSetting {
  maxConcurrency: number | null;
  ratePerSecond: number | null;
  groupBy: 'group' | null;
  /** Requested at, and in force everywhere from (answer + IN_FORCE_MS). */
  sent: number;
  inForce: number;
}

interface History {
  tasks: ModelTask[];
  /** Per type: [in force from, lifted at] (the resume's request; Infinity while paused). */
  pauses: Map<TaskType, { from: number; sent: number; until: number; resumedInForce: number }[]>;
  limits: LimitSetting[];
  kills: number[];
  connectionLosses: number[];
  /** When the last operation was sent and the final resume answered. */
  end: number;
}

export interface FleetModelOptions {
  label: string;
  /** DATABASE_URL of process `index` (0..2) for database `name`. */
  urlFor(name: string, index: number): string;
  /** Server addresses (host:port) whose connections of the fleet's user 'lose-connections' kills. */
  servers: string[];
  /** The URL of the server the test creates its database on (a node of the cluster, or the one server). */
  log?: (line: string) => void;
}

/** Everything a run needs that outlives one seed: the database, the receiver, the handler module, the worker loop. */
export class FleetModel {
  db!: TestDatabase;
  #receiver!: Server;
  #port = 0;
  #dir = '';
  #user = '';
  #password = '';
  servers: (ServerProcess | undefined)[] = [];
  #calls: Call[] = [];
  #leases: { tag: string; at: number }[] = [];
  /** Tags of pull tasks whose ack was not answered 200: they may run again. */
  #unacked = new Set<string>();
  #workers: Promise<void>[] = [];
  #stopWorkers = false;
  #seed = 0;

  constructor(private readonly options: FleetModelOptions) {}

  async setUp(): Promise<void> {
    this.db = await createTestDatabase(this.options.label);
    await createShop(this.db);
    await this.db.execute(
      'CREATE TABLE fleet_effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(64) NOT NULL, at DATETIME(3) NOT NULL, KEY (tag))',
    );
    // The fleet connects as a user of its own, so a lost connection can be dealt to it alone.
    this.#user = `pf_${this.db.name.slice(-6)}`;
    this.#password = `pw${Math.random().toString(36).slice(2, 10)}`;
    await this.db.execute(`CREATE USER '${this.#user}'@'%' IDENTIFIED BY '${this.#password}'`);
    await this.db.execute(`GRANT ALL PRIVILEGES ON \`${this.db.name}\`.* TO '${this.#user}'@'%'`);
    this.#dir = mkdtempSync(join(tmpdir(), 'fleet-model-'));
    writeFileSync(join(this.#dir, 'handlers.mjs'), HANDLERS);
    this.#receiver = createServer((request, response) => {
      const url = new URL(request.url ?? '/', 'http://receiver');
      const call: Call = {
        tag: url.searchParams.get('t') ?? '',
        group: url.searchParams.get('g') ?? '',
        start: Date.now(),
        end: Infinity,
        cut: false,
      };
      this.#calls.push(call);
      request.resume();
      response.on('close', () => {
        call.end = Date.now();
        call.cut = !response.writableEnded;
      });
      setTimeout(() => response.writableEnded || response.destroyed || response.end('ok'), HOLD_MS[call.group as 'a' | 'b'] ?? 10);
    });
    this.#receiver.listen(0, '127.0.0.1');
    await new Promise((resolve) => this.#receiver.once('listening', resolve));
    this.#port = (this.#receiver.address() as AddressInfo).port;
  }

  async tearDown(): Promise<void> {
    await this.#stopWorkerLoops();
    await Promise.all(this.servers.map((server) => server?.stop('SIGKILL') ?? Promise.resolve(null)));
    this.#receiver?.close();
    if (this.#dir !== '') rmSync(this.#dir, { recursive: true, force: true });
    if (this.#user !== '') await this.db.execute(`DROP USER IF EXISTS '${this.#user}'@'%'`).catch(() => undefined);
    await this.db?.drop();
  }

  #env(index: number): Record<string, string> {
    // Multi-host URLs (a, b, c) are no WHATWG URL: the credentials are put in by hand.
    const url = this.options.urlFor(this.db.name, index).replace(/^mysql:\/\/[^@/]*@/, `mysql://${this.#user}:${this.#password}@`);
    return {
      DATABASE_URL: url,
      SHARDING: 'on',
      LEASE_MS: String(LEASE_MS),
      HANDLERS: join(this.#dir, 'handlers.mjs'),
      WORKER_TYPES: 'fleet_pull',
      WEBHOOK_SECRET: 'fleet-model-secret',
      WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${this.#port}`,
      WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS),
      CONCURRENCY: '4',
    };
  }

  async #start(index: number): Promise<ServerProcess> {
    const server = await startServer({ env: this.#env(index), timeoutMs: 60_000 });
    this.servers[index] = server;
    return server;
  }

  /** A fresh fleet state for a seed: the same three processes (restarted if dead), empty tables, no controls. */
  async #reset(): Promise<void> {
    await this.#stopWorkerLoops();
    await Promise.all(this.servers.map((server) => server?.stop('SIGKILL') ?? Promise.resolve(null)));
    this.servers = [];
    for (const table of ['punctual_tasks', 'punctual_type_controls', 'punctual_limit_slots', 'fleet_effects', 'close_runs'])
      await this.db.execute(`DELETE FROM ${table}`);
    this.#calls = [];
    this.#leases = [];
    this.#unacked.clear();
    for (let i = 0; i < 3; i++) await this.#start(i);
    await waitFor(
      async () => {
        const [row] = await this.db.query<any[]>(
          'SELECT COUNT(*) AS n, COUNT(DISTINCT owner) AS owners FROM punctual_shard_leases WHERE lease_until > UTC_TIMESTAMP(3)',
        );
        return Number(row.n) === 256 && Number(row.owners) === 3;
      },
      30_000,
      'the three processes to share the shards out',
    );
    this.#startWorkerLoops();
  }

  /** Two pull workers, each leasing through a random live process, acking at once. */
  #startWorkerLoops(): void {
    this.#stopWorkers = false;
    const loop = async () => {
      while (!this.#stopWorkers) {
        const live = this.servers.filter((server): server is ServerProcess => server !== undefined && server.child.exitCode === null);
        const server = live[Math.floor(Math.random() * live.length)];
        if (server === undefined) {
          await sleep(50);
          continue;
        }
        try {
          const { status, body } = await server.request('POST', '/workers/lease', {
            types: ['fleet_pull'],
            max: 5,
            leaseMs: 5000,
            waitMs: 300,
          });
          if (status !== 200) {
            await sleep(50);
            continue;
          }
          const at = Date.now();
          const tasks = body.tasks as { id: number; leaseToken: string; payload: { tag: string } }[];
          for (const task of tasks) this.#leases.push({ tag: task.payload.tag, at });
          if (tasks.length > 0) {
            const acked = await server
              .request('POST', '/workers/ack', { acks: tasks.map((t) => ({ id: t.id, leaseToken: t.leaseToken })) })
              .catch(() => ({ status: 0, body: undefined }));
            // Told the ack failed (a 503 through a lost connection, a killed process): the task comes back when its lease runs out.
            if (acked.status !== 200) for (const task of tasks) this.#unacked.add(task.payload.tag);
          }
        } catch {
          await sleep(50); // its process was killed: the next one
        }
      }
    };
    this.#workers = [loop(), loop()];
  }

  async #stopWorkerLoops(): Promise<void> {
    this.#stopWorkers = true;
    await Promise.allSettled(this.#workers);
    this.#workers = [];
  }

  /** One seed's run: reset, the operations, the final resume, the settle, then the checks. Throws on a broken rule. */
  async run(ops: readonly Op[]): Promise<void> {
    this.#seed++;
    const started = Date.now();
    await this.#reset();
    const history = await this.#drive(ops);
    await this.#settle(history);
    await this.#check(history);
    const count = (kind: Op['kind']) => ops.filter((op) => op.kind === kind).length;
    console.log(
      `fleet model run ${this.#seed}: ${ops.length} operations (${history.tasks.length} tasks, ${history.tasks.filter((t) => t.cancelled).length} cancelled, ` +
        `${count('pause')} pauses, ${count('limits')} limit changes, ${history.kills.length} kills, ${history.connectionLosses.length} lost connections), ` +
        `${this.#calls.length} webhook calls, ${this.#leases.length} leases (${this.#unacked.size} tasks' acks refused); all rules held, in ${Date.now() - started} ms`,
    );
  }

  async #request(index: number, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    let server = this.servers[index % 3];
    if (server === undefined || server.child.exitCode !== null || server.child.signalCode !== null) server = await this.#start(index % 3);
    return server.request(method, path, body);
  }

  async #drive(ops: readonly Op[]): Promise<History> {
    const history: History = { tasks: [], pauses: new Map(), limits: [], kills: [], connectionLosses: [], end: 0 };
    const orders = makeOrders(40, 20, `F${this.#seed}-${Date.now() % 100000}-`);
    await insertOrders(this.db, orders);
    let nextOrder = 0;
    const dueOf = (due: 'now' | 'soon' | 'later') =>
      Date.now() + (due === 'now' ? 0 : due === 'soon' ? 300 + Math.floor(Math.random() * 1200) : 2500 + Math.floor(Math.random() * 2500));
    let tags = 0;
    const create = async (op: Extract<Op, { kind: 'create' }>, runAt: number) => {
      if (op.type === 'close_order' && nextOrder >= orders.length) return;
      const tag = `s${this.#seed}-${tags++}`;
      const payload =
        op.type === 'close_order'
          ? { orderSn: orders[nextOrder++]!.orderSn }
          : op.type === 'webhook'
            ? { url: `http://127.0.0.1:${this.#port}/hook?t=${tag}&g=${op.group}`, method: 'POST', body: { tag } }
            : { tag };
      const key = op.keyed ? `k-${tag}` : undefined;
      const answer = await this.#request(op.via, 'POST', '/tasks', {
        type: op.type,
        payload,
        runAt,
        group: op.group,
        ...(key === undefined ? {} : { key }),
      });
      if (answer.status !== 201) throw new Error(`create answered ${answer.status}: ${JSON.stringify(answer.body)}`);
      history.tasks.push({
        tag,
        id: answer.body.id,
        type: op.type,
        group: op.group,
        ...(key === undefined ? {} : { key }),
        cancelled: false,
      });
    };
    for (const op of ops) {
      switch (op.kind) {
        case 'burst':
          // A sale's wall: the tasks of one instant, through each process in turn, at once.
          {
            const runAt = dueOf(op.due);
            await Promise.all(
              Array.from({ length: op.count }, (_, n) =>
                create({ kind: 'create', type: op.type, due: op.due, via: n % 3, group: op.group, keyed: false }, runAt),
              ),
            );
          }
          break;
        case 'create':
          await create(op, dueOf(op.due));
          break;
        case 'pause':
        case 'resume': {
          const sent = Date.now();
          const answer = await this.#request(op.via, 'POST', `/types/${op.type}/${op.kind}`);
          if (answer.status !== 200) throw new Error(`${op.kind} answered ${answer.status}`);
          const list = history.pauses.get(op.type) ?? [];
          history.pauses.set(op.type, list);
          const open = list.at(-1);
          if (op.kind === 'pause' && (open === undefined || open.until !== Infinity))
            list.push({ from: Date.now() + IN_FORCE_MS, sent, until: Infinity, resumedInForce: Infinity });
          if (op.kind === 'resume' && open !== undefined && open.until === Infinity) {
            open.until = sent;
            open.resumedInForce = Date.now() + IN_FORCE_MS;
          }
          break;
        }
        case 'limits': {
          const sent = Date.now();
          const body = { maxConcurrency: op.maxConcurrency, ratePerSecond: op.ratePerSecond, groupBy: op.groupBy };
          const answer = await this.#request(op.via, 'PUT', '/types/webhook/limits', body);
          if (answer.status !== 200) throw new Error(`limits answered ${answer.status}: ${JSON.stringify(answer.body)}`);
          history.limits.push({ ...body, sent, inForce: Date.now() + IN_FORCE_MS });
          break;
        }
        case 'cancel':
        case 'reschedule':
        case 'upsert': {
          if (history.tasks.length === 0) break;
          const task = history.tasks[op.target % history.tasks.length]!;
          if (op.kind === 'cancel') {
            const answer = await this.#request(op.via, 'POST', `/tasks/${task.id}/cancel`);
            if (answer.status === 200) task.cancelled = true;
            else if (answer.status !== 409) throw new Error(`cancel answered ${answer.status}`);
          } else if (op.kind === 'reschedule') {
            const answer = await this.#request(op.via, 'POST', `/tasks/${task.id}/reschedule`, { delayMs: op.delayMs });
            if (answer.status !== 200 && answer.status !== 409) throw new Error(`reschedule answered ${answer.status}`);
          } else if (task.key !== undefined && task.type !== 'close_order') {
            // A replace of the pending task: a later runAt, the same payload.
            const [row] = await this.db.query<any[]>('SELECT payload FROM punctual_tasks WHERE id = ?', [task.id]);
            const payload = typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload;
            const answer = await this.#request(op.via, 'POST', '/tasks', {
              type: task.type,
              payload,
              delayMs: op.delayMs,
              group: task.group,
              key: task.key,
              onKeyConflict: 'replace',
            });
            if (![200, 201, 409].includes(answer.status))
              throw new Error(`upsert answered ${answer.status}: ${JSON.stringify(answer.body)}`);
          }
          break;
        }
        case 'kill': {
          const server = this.servers[op.via];
          if (server !== undefined && server.child.exitCode === null) {
            await server.stop('SIGKILL');
            history.kills.push(Date.now());
          }
          await this.#start(op.via);
          break;
        }
        case 'lose-connections': {
          history.connectionLosses.push(Date.now());
          await this.#killConnections();
          break;
        }
        case 'wait':
          await sleep(op.ms);
          break;
      }
    }
    // Every type resumed, so every task not cancelled can run.
    for (const [type, list] of history.pauses) {
      const open = list.at(-1);
      if (open === undefined || open.until !== Infinity) continue;
      open.until = Date.now();
      const answer = await this.#request(0, 'POST', `/types/${type}/resume`);
      if (answer.status !== 200) throw new Error(`resume answered ${answer.status}`);
      open.resumedInForce = Date.now() + IN_FORCE_MS;
    }
    history.end = Date.now();
    return history;
  }

  /** Kills every connection of the fleet's user on every server (a network cut, a failover). */
  async #killConnections(): Promise<void> {
    for (const address of this.options.servers) {
      const [host, port] = address.split(':');
      const conn = await mysql.createConnection({ host, port: Number(port), user: 'root' });
      try {
        const [rows] = await conn.query<mysql.RowDataPacket[]>('SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?', [
          this.#user,
        ]);
        for (const row of rows) await conn.query(`KILL CONNECTION ${Number(row.ID)}`).catch(() => undefined);
      } finally {
        await conn.end();
      }
    }
  }

  /** Waits until every task is finished and a webhook cut by a kill has had its lease and its rerun. */
  async #settle(history: History): Promise<void> {
    const ids = history.tasks.map((task) => task.id);
    if (ids.length === 0) return;
    const cutByKill = history.kills.length > 0;
    await waitFor(
      async () => {
        const [row] = await this.db.query<any[]>(
          "SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status IN ('pending', 'running')",
          [ids],
        );
        return Number(row.n) === 0;
      },
      (cutByKill ? RUN_LEASE_MS : 0) + 60_000,
      'every task of the seed to finish',
    ).catch(async (error: Error) => {
      const rows = await this.db.query<any[]>(
        "SELECT id, type, status, attempts, run_at FROM punctual_tasks WHERE id IN (?) AND status IN ('pending', 'running')",
        [ids],
      );
      throw new Error(`${error.message}; unfinished: ${JSON.stringify(rows)}`);
    });
    await sleep(300); // the last calls' closes and acks reach the receiver and the worker
  }

  async #check(history: History): Promise<void> {
    const failures: string[] = [];
    const fail = (message: string) => failures.push(message);
    const ids = history.tasks.map((task) => task.id);
    const rows =
      ids.length === 0 ? [] : await this.db.query<any[]>('SELECT id, status, run_at, type FROM punctual_tasks WHERE id IN (?)', [ids]);
    const byId = new Map(rows.map((row) => [Number(row.id), row]));
    this.#runAts.clear();
    for (const row of rows) this.#runAts.set(Number(row.id), new Date(row.run_at).getTime());
    const ledger = await this.db.query<any[]>('SELECT tag, at FROM fleet_effects');
    const closes = await this.db.query<any[]>('SELECT task_id FROM close_runs');
    const closesOf = new Map<number, number>();
    for (const row of closes) closesOf.set(Number(row.task_id), (closesOf.get(Number(row.task_id)) ?? 0) + 1);
    const lastKill = Math.max(-Infinity, ...history.kills);

    /** Every start of a task's run, by tag: when it began (ms). */
    const starts = new Map<string, number[]>();
    const add = (tag: string, at: number) => starts.set(tag, [...(starts.get(tag) ?? []), at]);
    for (const row of ledger) add(row.tag, new Date(row.at).getTime());
    for (const call of this.#calls) add(call.tag, call.start);
    for (const lease of this.#leases) add(lease.tag, lease.at);

    for (const task of history.tasks) {
      const row = byId.get(task.id);
      if (row === undefined) {
        fail(`${task.tag} (task ${task.id}) is gone from the table`);
        continue;
      }
      const runAt = new Date(row.run_at).getTime();
      const begun = (starts.get(task.tag) ?? []).sort((a, b) => a - b);
      const runs = task.type === 'close_order' ? (closesOf.get(task.id) ?? 0) : begun.length;
      if (task.cancelled) {
        if (row.status !== 'cancelled') fail(`${task.tag} was cancelled (200) but is ${row.status}`);
        if (runs !== 0) fail(`${task.tag} was cancelled but ran ${runs} times`);
        continue;
      }
      if (row.status !== 'done') fail(`${task.tag} (${task.type}, task ${task.id}) ended ${row.status}, not done`);
      // At least once where a kill -9 may have cut a run whose work was done; else exactly once.
      // Or a pull task whose ack the service refused (it said so): its lease runs out and it runs again.
      const mayRepeat =
        ((task.type === 'webhook' || task.type === 'fleet_pull') && begun.length > 0 && begun[0]! < lastKill) ||
        (task.type === 'fleet_pull' && this.#unacked.has(task.tag));
      if (runs === 0 || (runs > 1 && !mayRepeat)) fail(`${task.tag} (${task.type}, task ${task.id}) ran ${runs} times`);
      if (begun.length > 0 && begun[0]! < runAt) fail(`${task.tag} (${task.type}) started ${runAt - begun[0]!} ms before its runAt`);
      // Paused: no start inside a pause in force.
      for (const pause of history.pauses.get(task.type) ?? [])
        for (const at of begun)
          if (at >= pause.from && at < pause.until) fail(`${task.tag} (${task.type}) started while its type was paused`);
      // Waiting: past every reason it had to wait, it started within the bound.
      const first = begun[0];
      if (first === undefined || task.type === 'close_order') continue; // close_order: its start is not seen, only its ledger row
      if (task.type === 'webhook' && history.limits.some((limit) => limit.maxConcurrency !== null || limit.ratePerSecond !== null))
        continue; // the idle-gap check below
      const eligible = this.#eligibleAt(task, runAt, first, history);
      if (first - eligible > WAIT_BOUND_MS)
        fail(`${task.tag} (${task.type}, task ${task.id}) waited ${first - eligible} ms past when it could run`);
    }
    this.#checkLimits(history, fail);
    if (failures.length > 0) throw new Error(`${failures.length} broken rules:\n  ${failures.slice(0, 20).join('\n  ')}`);
  }

  /** When `task` could have run at the latest, leaving aside its type's limits. */
  #eligibleAt(task: ModelTask, runAt: number, start: number, history: History): number {
    let at = runAt;
    for (const pause of history.pauses.get(task.type) ?? [])
      if (pause.sent <= start && pause.until >= at - IN_FORCE_MS) at = Math.max(at, pause.resumedInForce);
    for (const kill of history.kills) if (kill <= start && kill + TAKEOVER_MS >= at) at = Math.max(at, kill + TAKEOVER_MS);
    // A webhook due by a kill may have been claimed by the killed process before its call went
    // out: its run lease runs out, and the shard's new owner recovers it at its next refill.
    if (task.type === 'webhook')
      for (const kill of history.kills) if (runAt <= kill && kill <= start) at = Math.max(at, kill + RUN_LEASE_MS + REFILL_MS);
    for (const loss of history.connectionLosses) if (loss <= start && loss + RECONNECT_MS >= at) at = Math.max(at, loss + RECONNECT_MS);
    // A pull task: the worker loop asks every few hundred ms, through a process that may be dead.
    return at;
  }

  /**
   * The webhook limits, from the receiver's calls: never more in flight than maxConcurrency, never
   * more starts in a window than ratePerSecond, and no group with room and a waiting task left
   * without a start for longer than the bound.
   */
  #checkLimits(history: History, fail: (message: string) => void): void {
    const settings = history.limits;
    if (settings.length === 0) return;
    const webhookTasks = history.tasks.filter((task) => task.type === 'webhook' && !task.cancelled);
    const groupOf = (tag: string) => webhookTasks.find((task) => task.tag === tag)?.group ?? '';
    const calls = [...this.#calls].sort((a, b) => a.start - b.start);
    for (const [i, setting] of settings.entries()) {
      const from = setting.inForce;
      const until = settings[i + 1]?.sent ?? Infinity;
      if (from >= until) continue;
      const key = (call: Call) => (setting.groupBy === 'group' ? groupOf(call.tag) : '');
      for (const call of calls) {
        if (call.start < from || call.start >= until) continue;
        const same = calls.filter((other) => key(other) === key(call));
        if (setting.maxConcurrency !== null) {
          const inFlight = same.filter((other) => other.start <= call.start && other.end > call.start).length;
          if (inFlight > setting.maxConcurrency)
            fail(`${inFlight} webhooks of group '${key(call)}' in flight at once, limit ${setting.maxConcurrency}`);
        }
        if (setting.ratePerSecond !== null) {
          const inWindow = same.filter(
            (other) => other.start >= from && other.start <= call.start && other.start > call.start - (1000 - RATE_LAG_MS),
          ).length;
          if (inWindow > Math.max(1, Math.floor(setting.ratePerSecond)))
            fail(`${inWindow} webhooks of group '${key(call)}' started within ${1000 - RATE_LAG_MS} ms, rate ${setting.ratePerSecond}`);
        }
      }
    }
    // Idle gaps: a group with a waiting, runnable task and room under its limits starts one within the bound.
    const starts = new Map<string, number>();
    for (const call of calls) if (!starts.has(call.tag)) starts.set(call.tag, call.start);
    const settingAt = (t: number) => [...settings].reverse().find((s) => s.sent <= t);
    const events = new Set<number>();
    for (const task of webhookTasks) {
      const start = starts.get(task.tag);
      if (start === undefined) continue;
      events.add(this.#eligibleAtFromRow(task, start, history));
    }
    for (const call of calls) {
      if (Number.isFinite(call.end)) events.add(call.end);
      events.add(call.start + 1000);
    }
    for (const setting of settings) events.add(setting.inForce);
    for (const t of [...events].sort((a, b) => a - b)) {
      const setting = settingAt(t);
      // Around a change, during a dead process's slot leases, and once every call is done: not judged.
      if (
        setting === undefined ||
        t < setting.inForce ||
        history.kills.some((kill) => t >= kill && t < kill + RUN_LEASE_MS + WAIT_BOUND_MS)
      )
        continue;
      for (const group of setting.groupBy === 'group' ? GROUPS : ['']) {
        const inGroup = (tag: string) => setting.groupBy !== 'group' || groupOf(tag) === group;
        const waiting = webhookTasks.filter((task) => {
          if (!inGroup(task.tag)) return false;
          const start = starts.get(task.tag);
          if (start === undefined || start <= t) return false;
          return this.#eligibleAtFromRow(task, start, history) <= t;
        });
        if (waiting.length === 0) continue;
        const groupCalls = calls.filter((call) => inGroup(call.tag));
        const inFlight = groupCalls.filter((call) => call.start <= t && call.end > t).length;
        if (setting.maxConcurrency !== null && inFlight >= setting.maxConcurrency) continue;
        const recent = groupCalls.filter((call) => call.start > t - 1000 && call.start <= t).length;
        if (setting.ratePerSecond !== null && recent >= Math.max(1, Math.floor(setting.ratePerSecond))) continue;
        const next = groupCalls.find((call) => call.start > t);
        if (next === undefined || next.start - t > WAIT_BOUND_MS)
          fail(
            `group '${group}' of webhook had room and ${waiting.length} runnable tasks at +${t - history.end} ms, next start ${next === undefined ? 'never' : `${next.start - t} ms later`}`,
          );
      }
    }
  }

  /** A webhook task's eligibility, from its runAt as the table has it at check time. */
  #eligibleAtFromRow(task: ModelTask, start: number, history: History): number {
    return this.#eligibleAt(task, this.#runAts.get(task.id) ?? 0, start, history);
  }

  readonly #runAts = new Map<number, number>();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
