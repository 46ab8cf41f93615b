/**
 * Pull workers on a three-node Galera cluster (scripts/cluster.sh): two sharded processes
 * (SHARDING=on), each writing through a different node first, serve the leases of one worker
 * type to eight workers, four on each. On a Galera node the claim's transaction is not pipelined,
 * so its lock and its look ahead go as two statements (src/store/pulls.ts, lockDue), and two
 * claims on two nodes meet only at certification. Every task the workers receive is written to a
 * ledger: each task is leased once (not once per process), none before its
 * runAt, each done with one attempt; both processes served leases.
 */
import type { RowDataPacket } from 'mysql2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PunctualClient, type LeasedTask } from '../../clients/ts/src/client.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { conflicts, urlFrom } from '../helpers/galera.js';
import { errorsLogged, killLeftoverServers, waitFor } from '../helpers/server.js';
import { percentile, startMembers, type Member } from '../helpers/shards.js';

const TYPE = 'g_pull';
const TASKS = 1200;
const WORKERS_EACH = 4;

let db: TestDatabase;
const members: Member[] = [];

beforeAll(async () => {
  db = await createTestDatabase('galera_workers');
  // One after the other: the first migrates, the second finds the schema there.
  for (const first of [1, 2]) {
    const [member] = await startMembers([{ DATABASE_URL: urlFrom(first, db.name), WORKER_TYPES: TYPE }], 60_000);
    members.push(member!);
  }
});

afterAll(async () => {
  for (const member of members) await member.server.stop();
  killLeftoverServers();
  await db?.drop();
});

describe('pull workers on a Galera cluster', () => {
  it('eight workers through two processes on two nodes: each task leased once, none before its runAt, all done', async () => {
    const conflictsBefore = await conflicts();
    // Due over 4 s from 3 s on, inserted straight into the table as a shop's own code may.
    const firstDue = Date.now() + 3000;
    const rows = Array.from({ length: TASKS }, (_, n) => [
      TYPE,
      JSON.stringify({ n }),
      new Date(firstDue + Math.floor((n * 4000) / TASKS)),
    ]);
    await db.execute('INSERT INTO punctual_tasks (type, payload, run_at) VALUES ?', [rows]);
    const [inserted] = await db.query<({ n: number } & RowDataPacket)[]>('SELECT COUNT(*) AS n FROM punctual_tasks WHERE type = ?', [TYPE]);
    expect(Number(inserted!.n)).toBe(TASKS);

    /** The ledger: one entry per task received, by which process, and when. */
    const ledger: { task: LeasedTask; by: number; receivedAt: number }[] = [];
    let acked = 0;
    let refused = 0;
    let stop = false;
    const workers = members.flatMap((member, by) =>
      Array.from({ length: WORKERS_EACH }, async () => {
        const client = new PunctualClient({ baseUrl: member.server.baseUrl });
        try {
          while (!stop) {
            const tasks = await client.lease({ types: [TYPE], max: 10, leaseMs: 60_000, waitMs: 1000 });
            const receivedAt = Date.now();
            if (tasks.length === 0) continue;
            for (const task of tasks) ledger.push({ task, by, receivedAt });
            const answer = await client.ackAll(tasks);
            acked += answer.acked;
            refused += answer.refused;
          }
        } catch (error) {
          stop = true;
          throw new Error(`a worker of process ${by + 1} failed: ${String(error)}${await errorsLogged(member.server)}`, { cause: error });
        }
      }),
    );
    const working = Promise.all(workers);
    try {
      await Promise.race([waitFor(async () => acked >= TASKS || stop || undefined, 60_000, 'every task to be leased and acked'), working]);
    } finally {
      stop = true;
      await working;
    }

    const leasesOf = new Map<number, number>();
    for (const { task } of ledger) leasesOf.set(task.id, (leasesOf.get(task.id) ?? 0) + 1);
    const twice = [...leasesOf].filter(([, n]) => n > 1);
    const early = ledger.filter(({ task, receivedAt }) => receivedAt < Date.parse(task.runAt));
    const byProcess = members.map((_, by) => ledger.filter((entry) => entry.by === by).length);
    const late = ledger.map(({ task, receivedAt }) => receivedAt - Date.parse(task.runAt));
    const [done] = await db.query<({ n: number; attempts: number } & RowDataPacket)[]>(
      "SELECT COUNT(*) AS n, SUM(attempts) AS attempts FROM punctual_tasks WHERE type = ? AND status = 'done'",
      [TYPE],
    );
    console.log(
      `[cluster workers] ${TASKS} tasks over 4 s, ${WORKERS_EACH * members.length} workers through 2 processes on 2 nodes: ` +
        `leases by process ${byProcess.join('/')}, received after runAt p50 ${percentile(late, 0.5)} ms, p99 ${percentile(late, 0.99)} ms, ` +
        `max ${Math.max(...late)} ms; ${(await conflicts()) - conflictsBefore} write conflicts between nodes`,
    );
    expect(twice).toEqual([]);
    expect(early).toEqual([]);
    expect(ledger).toHaveLength(TASKS);
    expect({ acked, refused }).toEqual({ acked: TASKS, refused: 0 });
    for (const n of byProcess) expect(n).toBeGreaterThan(0);
    expect(Number(done!.n)).toBe(TASKS);
    expect(Number(done!.attempts)).toBe(TASKS);
  });
});
