/**
 * A start killed with SIGKILL right after a statement of its migrations, then a normal start: it
 * must be ready within 20 s, record every migration, end with the schema a clean migration makes,
 * and run a task. From an empty database and from one the previous release migrated.
 *
 * In `npm test`: the examples (the ALTER of 0013 a deploy once cut, the first statement, a view of
 * 0020, a dynamic ALTER of 0021) and a few points drawn at random (KILL_SEED reproduces a draw).
 * `npm run test:migration-kills` (KILL_POINTS=all) kills at every statement of both paths.
 */
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ensureDatabase } from '../../src/db/connection.js';
import { migrateDatabase } from '../../src/db/migrate.js';
import {
  databaseFor,
  KILL_MAIN,
  killPoints,
  recordedMigrations,
  startKilledAt,
  type KillPath,
  type KillPoint,
} from '../helpers/migration-kills.js';
import { schemaSnapshot } from '../helpers/schema-snapshot.js';
import { killLeftoverServers, startServer, waitFor } from '../helpers/server.js';
import { migrationJournal } from '../../src/db/migration-files.js';

vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

const ALL = process.env.KILL_POINTS === 'all';
const SEED = Number(process.env.KILL_SEED ?? Math.floor(Math.random() * 1e9));
/** Points drawn at random per path, beside the examples, in `npm test`. */
const DRAWN = 3;
const READY_WITHIN_MS = 20_000;

/** A small seeded generator (mulberry32): the same seed, the same draw. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function chosen(path: KillPath, examples: ((point: KillPoint, text: string) => boolean)[]): KillPoint[] {
  const all = killPoints(path);
  if (ALL) return all.map((entry) => entry.point);
  const picked = new Map<number, KillPoint>();
  for (const example of examples) {
    const found = all.find((entry) => example(entry.point, entry.text));
    if (found === undefined) throw new Error(`no kill point on the ${path} path matches an example`);
    picked.set(found.point.index, found.point);
  }
  const draw = random(SEED + (path === 'empty' ? 0 : 1));
  for (let i = 0; i < DRAWN; i++) {
    const entry = all[Math.floor(draw() * all.length)]!;
    picked.set(entry.point.index, entry.point);
  }
  return [...picked.values()].sort((a, b) => a.index - b.index);
}

const PATHS: [KillPath, KillPoint[]][] = [
  [
    'empty',
    chosen('empty', [
      (point) => point.index === 0,
      (point) => point.migration === '0013_task_group',
      (point) => point.migration === '0014_run_history' && point.statement === 2,
    ]),
  ],
  [
    'previous release',
    chosen('previous release', [
      (point, text) => point.migration === '0020_own_namespace' && text.startsWith('EXECUTE'),
      (point, text) => point.migration === '0021_status_index' && point.statement === 8 && text.startsWith('EXECUTE'),
    ]),
  ],
];

/** The schema a clean migration makes on each path. */
const clean = new Map<KillPath, string[]>();

beforeAll(async () => {
  console.log(`kill points: ${PATHS.map(([path, points]) => `${points.length} on the ${path} path`).join(', ')} (KILL_SEED=${SEED})`);
  for (const [path] of PATHS) {
    const db = await databaseFor(path, 'migkill_clean');
    try {
      await ensureDatabase(db.url, db.name);
      await migrateDatabase(db.url, db.name);
      clean.set(path, await schemaSnapshot(db.pool, db.name));
    } finally {
      await db.drop();
    }
  }
});

afterAll(() => {
  killLeftoverServers();
});

describe.each(PATHS)('a start killed inside its migrations, from the %s', (path, points) => {
  it.each(points.map((point) => [`${point.migration} ${point.statement}/${point.statements}`, point] as const))(
    'right after %s: the next start is ready within 20 s, finishes them and runs a task',
    async (_name, point) => {
      const db = await databaseFor(path, 'migkill');
      try {
        const killed = await startKilledAt(db, point);
        expect(
          killed,
          `the first start was not killed at ${point.migration} ${point.statement}: ${killed.logs.slice(-3).join(' | ')}`,
        ).toMatchObject({
          killed: true,
          exit: null,
        });
        const started = Date.now();
        const server = await startServer({
          env: { DATABASE_URL: db.url, WORKER_TYPES: 'after_kill' },
          timeoutMs: READY_WITHIN_MS,
          main: KILL_MAIN,
        });
        const readyMs = Date.now() - started;
        try {
          console.log(`${path}: killed after ${point.migration} ${point.statement}/${point.statements}; next start ready in ${readyMs} ms`);
          expect(await recordedMigrations(db)).toBe(migrationJournal().length);
          expect(await schemaSnapshot(db.pool, db.name)).toEqual(clean.get(path));
          const created = await server.request('POST', '/tasks', { type: 'after_kill', payload: {}, delayMs: 0 });
          expect(created.status).toBe(201);
          const leased = await waitFor(async () => {
            const answer = await server.request('POST', '/workers/lease', { types: ['after_kill'], max: 1, leaseMs: 5000 });
            return answer.body.tasks?.[0];
          });
          expect((await server.request('POST', '/workers/ack', { acks: [{ id: leased.id, leaseToken: leased.leaseToken }] })).status).toBe(
            200,
          );
          const [row] = await db.query<mysql.RowDataPacket[]>('SELECT status FROM punctual_tasks WHERE id = ?', [created.body.id]);
          expect(row?.status).toBe('done');
        } finally {
          expect(await server.stop()).toBe(0);
        }
      } finally {
        await db.drop();
      }
    },
  );
});
