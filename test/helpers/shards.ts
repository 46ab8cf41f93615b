/**
 * Shard leases (SHARDING=on) seen from outside: real processes, the shard_leases table, and who
 * ran what.
 *
 * Who ran what is read from each process's log: its 'shards acquired' lines (which shards, when)
 * and its 'task done' lines (which task, when its run began). A run is rightful when the process
 * that ran it was the last to acquire the task's shard (id MOD 256) before the run began; the
 * effects ledger (close_runs, shop.ts) counts committed runs, so a task run twice is counted too.
 */
import type { RowDataPacket } from 'mysql2';
import type { TestDatabase } from './db.js';
import { parsePrometheus } from './prometheus.js';
import { createTasks, startServer, waitFor, type ServerProcess } from './server.js';
import { countStatus, type Order } from './shop.js';

export const SHARDS = 256;

export interface Member {
  server: ServerProcess;
  /** Its name in members and shard_leases. */
  id: string;
}

/** One sharded process per entry of `envs` (each with SHARDING=on added), started at once. */
export async function startMembers(envs: Record<string, string>[], timeoutMs?: number): Promise<Member[]> {
  const servers = await Promise.all(envs.map((env) => startServer({ env: { SHARDING: 'on', ...env }, timeoutMs })));
  return Promise.all(servers.map(async (server) => ({ server, id: (await server.request('GET', '/cluster')).body.self as string })));
}

/** Shards with a valid lease, by owner. */
export async function leaseCounts(db: TestDatabase): Promise<Map<string, number>> {
  const rows = await db.query<({ owner: string; n: number } & RowDataPacket)[]>(
    'SELECT owner, COUNT(*) AS n FROM punctual_shard_leases WHERE owner IS NOT NULL AND lease_until > UTC_TIMESTAMP(3) GROUP BY owner',
  );
  return new Map(rows.map((row) => [row.owner, Number(row.n)]));
}

/** The shards `owner` holds a valid lease of. */
export async function shardsOf(db: TestDatabase, owner: string): Promise<Set<number>> {
  const rows = await db.query<({ shard: number } & RowDataPacket)[]>(
    'SELECT shard FROM punctual_shard_leases WHERE owner = ? AND lease_until > UTC_TIMESTAMP(3)',
    [owner],
  );
  return new Set(rows.map((row) => Number(row.shard)));
}

/** Whether `members` together hold every shard. */
export async function holdAll(db: TestDatabase, members: Member[]): Promise<boolean> {
  const counts = await leaseCounts(db);
  return members.reduce((sum, member) => sum + (counts.get(member.id) ?? 0), 0) === SHARDS;
}

/** Every shard held by one of `members`, each holding about 256/N, and each process agreeing. */
export async function balanced(db: TestDatabase, members: Member[]): Promise<boolean> {
  const counts = await leaseCounts(db);
  const held = members.map((member) => counts.get(member.id) ?? 0);
  if (held.reduce((a, b) => a + b, 0) !== SHARDS) return false;
  if (held.some((n) => n < (SHARDS / members.length) * 0.6 || n > (SHARDS / members.length) * 1.4)) return false;
  const said = await Promise.all(members.map(async (member) => (await member.server.request('GET', '/readyz')).body.shards as number));
  return said.every((n, i) => n === held[i]);
}

/** Runs whose process did not hold the task's shard when the run began (the last acquirer before it). */
export function wrongfulRuns(members: Member[]): { taskId: number; by: string; owner: string | undefined }[] {
  const acquired: { time: number; shard: number; id: string }[] = [];
  for (const { server, id } of members) {
    for (const line of server.logs) {
      if (line.msg !== 'shards acquired') continue;
      for (const shard of line.shards as number[]) acquired.push({ time: Number(line.time), shard, id });
    }
  }
  acquired.sort((a, b) => a.time - b.time);
  const wrong: { taskId: number; by: string; owner: string | undefined }[] = [];
  for (const { server, id } of members) {
    for (const line of server.logs) {
      // A task created through this process in a shard another owns is armed and claimed here too
      // (on the row's state alone); its run line says so.
      if (line.msg !== 'task done' || line.createdHere === true) continue;
      const taskId = Number(line.taskId);
      const startedAt = Number(line.startedAt);
      let owner: string | undefined;
      for (const event of acquired) {
        if (event.time > startedAt) break;
        if (event.shard === taskId % SHARDS) owner = event.id;
      }
      if (owner !== id) wrong.push({ taskId, by: id, owner });
    }
  }
  return wrong;
}

/** One sample of a process's /metrics (0 when absent). */
export async function metric(server: ServerProcess, name: string): Promise<number> {
  return parsePrometheus(await (await fetch(`${server.baseUrl}/metrics`)).text()).get(name) ?? 0;
}

/**
 * `orders` as close_order tasks from `firstDue` on, spread over `spreadMs`: `viaApi` of them
 * (600 by default, at most half) through the API, shared among the processes, the rest straight
 * into the table as a shop's own inserts. Returns the ids of `orders`' tasks.
 */
export async function enqueue(
  db: TestDatabase,
  members: Member[],
  orders: Order[],
  firstDue: number,
  spreadMs: number,
  viaApi = 600,
): Promise<number[]> {
  const runAt = (i: number) => firstDue + Math.floor((i * spreadMs) / orders.length);
  const half = Math.min(viaApi, Math.floor(orders.length / 2));
  const bodies = orders.slice(0, half).map((order, i) => ({ type: 'close_order', payload: { orderSn: order.orderSn }, runAt: runAt(i) }));
  const share = Math.ceil(bodies.length / members.length);
  const ids = (await Promise.all(members.map((m, k) => createTasks(m.server, bodies.slice(k * share, (k + 1) * share), 8)))).flat();
  if (ids.length !== half) throw new Error(`created ${ids.length} tasks through the API, not ${half}`);
  // A shop's own inserts, with every other column left to its default.
  const rows = orders.slice(half).map((order, i) => ['close_order', JSON.stringify({ orderSn: order.orderSn }), new Date(runAt(half + i))]);
  await db.execute('INSERT INTO punctual_tasks (type, payload, run_at) VALUES ?', [rows]);
  return idsOf(db, orders);
}

/** The ids of the close_order tasks of `orders`. */
export async function idsOf(db: TestDatabase, orders: Order[]): Promise<number[]> {
  const rows = await db.query<({ id: number } & RowDataPacket)[]>(
    "SELECT id FROM punctual_tasks WHERE JSON_UNQUOTE(JSON_EXTRACT(payload, '$.orderSn')) IN (?) ORDER BY id",
    [orders.map((order) => order.orderSn)],
  );
  return rows.map((row) => Number(row.id));
}

/** Every task of the test's database (they are all the test's). */
export async function allIds(db: TestDatabase): Promise<number[]> {
  return (await db.query<({ id: number } & RowDataPacket)[]>('SELECT id FROM punctual_tasks ORDER BY id')).map((row) => Number(row.id));
}

/** Pending tasks whose shard is in `shards`. */
export async function pendingIn(db: TestDatabase, shards: Set<number>): Promise<number> {
  if (shards.size === 0) return 0;
  const [row] = await db.query<({ n: number } & RowDataPacket)[]>(
    "SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'pending' AND id MOD 256 IN (?)",
    [[...shards]],
  );
  return Number(row?.n ?? 0);
}

/**
 * Waits until each process has armed exactly the pending tasks of its own shards, and together
 * every pending task of `ids` once (all of them still pending): the disjointness evidence. Fails
 * with what it saw last.
 */
export async function waitArmedInOwnShards(db: TestDatabase, members: Member[], ids: number[], timeoutMs: number): Promise<void> {
  let seen = '';
  const armedRight = async () => {
    const pending = await countStatus(db, 'pending', ids);
    const armed: number[] = [];
    const own: number[] = [];
    for (const member of members) {
      armed.push((await member.server.request('GET', '/readyz')).body.armed as number);
      own.push(await pendingIn(db, await shardsOf(db, member.id)));
    }
    seen = `pending ${pending} of ${ids.length}, armed ${armed.join('/')}, pending in own shards ${own.join('/')}`;
    return pending === ids.length && armed.every((n, i) => n === own[i]) && armed.reduce((x, y) => x + y, 0) === pending;
  };
  await waitFor(armedRight, Math.max(1000, timeoutMs), 'each process to arm the tasks of its shards').catch((error: Error) => {
    throw new Error(`${error.message}: ${seen}`);
  });
}

/** The p-th percentile (0..1) of `values`. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN;
}
