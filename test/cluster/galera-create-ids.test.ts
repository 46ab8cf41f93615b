/**
 * The id a create answers is its row's, on a Galera cluster too. Creates arriving together are
 * written by one multi-row INSERT … RETURNING (src/store/intake.ts). A DDL statement through
 * another node (a shop's migration, or CREATE DATABASE IF NOT EXISTS, which every start of
 * punctual ran until it looked the database up first) is replicated in total order and aborts the
 * writes running on every node; an autocommit INSERT so aborted is run again by the server, and its
 * client was told the ids of the aborted run: rows that do not exist. The fleet's model test found
 * it as tasks "gone from the table". Here one process on node 1 takes concurrent creates while
 * node 2 runs that DDL every few ms, and every answered id must hold its own create's payload.
 */
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { NODES, urlFrom } from '../helpers/galera.js';
import { killLeftoverServers, startServer, type ServerProcess } from '../helpers/server.js';

const CALLERS = 48;
const CREATES_EACH = 60;
/** How many times a caller sends a refused create (503) before the test gives up on it. */
const MAX_TRIES = 20;

let db: TestDatabase;
let server: ServerProcess;

beforeAll(async () => {
  db = await createTestDatabase('galera_create_ids');
  server = await startServer({ env: { DATABASE_URL: urlFrom(1, db.name), WORKER_TYPES: 'ids_kept' }, timeoutMs: 60_000 });
}, 90_000);

afterAll(async () => {
  await server?.stop();
  killLeftoverServers();
  await db?.drop();
});

describe('create ids on a Galera cluster', () => {
  it('creates through one node while another runs DDL: every id answered is its own row', async () => {
    const others = await Promise.all(
      [NODES[1]!, NODES[2]!].map((node) => {
        const [host, port] = node.split(':');
        return mysql.createConnection({ host, port: Number(port), user: 'root' });
      }),
    );
    let stop = false;
    let ddl = 0;
    const ddlLoops = others.map(async (other) => {
      while (!stop) {
        await other.query('CREATE DATABASE IF NOT EXISTS ??', [db.name]);
        ddl++;
      }
    });
    const answered: { tag: string; id: number }[] = [];
    const refusals = new Map<string, number>();
    try {
      // As a shop's client does: a 503 is sent again, with the same key, so it cannot make two,
      // after a pause that doubles with each try up to a second (with nonstop DDL through two
      // nodes, one create met a write conflict ten times running when sent again at once, and
      // twenty times running with pauses growing by 5 ms a try: a second in all).
      await Promise.all(
        Array.from({ length: CALLERS }, async (_, caller) => {
          for (let n = 0; n < CREATES_EACH; n++) {
            const tag = `c${caller}-${n}`;
            for (let tries = 1; ; tries++) {
              const { status, body } = await server.request('POST', '/tasks', {
                type: 'ids_kept',
                key: tag,
                payload: { tag },
                delayMs: 3_600_000,
              });
              if (status === 201 || status === 200) {
                answered.push({ tag, id: Number(body.id) });
                break;
              }
              const code = `${status} ${body?.code}`;
              refusals.set(code, (refusals.get(code) ?? 0) + 1);
              if (status !== 503 || tries === MAX_TRIES) throw new Error(`create ${tag} answered ${status}: ${JSON.stringify(body)}`);
              await new Promise((resolve) => setTimeout(resolve, Math.min(5 * 2 ** tries, 1_000)));
            }
          }
        }),
      );
    } finally {
      stop = true;
      await Promise.all(ddlLoops);
      for (const other of others) await other.end();
    }
    const rows = await db.query<any[]>('SELECT id, payload FROM punctual_tasks WHERE type = ?', ['ids_kept']);
    const tagOf = new Map(
      rows.map((row) => [Number(row.id), (typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload).tag]),
    );
    const wrong = answered.filter(({ tag, id }) => tagOf.get(id) !== tag);
    console.log(
      `[cluster create ids] ${answered.length} creates through node 1 beside ${ddl} DDL statements through nodes 2 and 3: ` +
        `${wrong.length} answered an id that is not their row; refused and sent again: ${JSON.stringify(Object.fromEntries(refusals))}`,
    );
    expect(wrong.slice(0, 5)).toEqual([]);
    // Only a write conflict, said as one: the transaction was aborted and nothing of it written.
    expect([...refusals.keys()].filter((code) => code !== '503 PUNCTUAL_WRITE_CONFLICT')).toEqual([]);
    expect(rows.length).toBe(CALLERS * CREATES_EACH);
  }, 120_000);
});
