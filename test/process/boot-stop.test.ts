/**
 * A SIGTERM while the server boots (a deploy that changes its mind, an orchestrator that gives
 * up) ends it cleanly: exit 0, never listening, the stop logged.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';

const MAIN = fileURLToPath(new URL('../../dist/app/main.js', import.meta.url));

let db: TestDatabase;

beforeAll(async () => {
  // Not created: the server creates and migrates it while booting.
  db = await createTestDatabase('bootstop', { create: false });
});

/** Every server this file started: killed at the end even if a test timed out before its finally. */
const children = new Set<ReturnType<typeof spawn>>();

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await db?.drop();
});

/** The server as a child process, its log lines collected; not waited for to be ready. */
function boot(env: Record<string, string>) {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', LOG_LEVEL: 'debug', DATABASE_URL: db.url, STOP_TIMEOUT_MS: '3000', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const logs: { msg: string }[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    try {
      logs.push(JSON.parse(line));
    } catch {
      // not a log line
    }
  });
  return { child, exited, logs };
}

describe('SIGTERM while booting', () => {
  it('ends with exit 0 and never listens, while the boot waits for the migration lock', async () => {
    // Hold the migration lock, so the boot is certainly under way (waiting for it) when the signal comes.
    const holder = await mysql.createConnection({ uri: db.url.replace(/\/[^/]+$/, '/') });
    const lockName = `punctual.migrate.${db.name}`.slice(0, 64);
    await holder.query('SELECT GET_LOCK(?, 10)', [lockName]);
    const server = boot({});
    try {
      await waitFor(
        async () => server.logs.some((line) => String(line.msg).startsWith('waiting for the migration turn')),
        60_000,
        'the boot to wait for the migration lock',
      );
      const asked = Date.now();
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      expect(Date.now() - asked).toBeLessThan(10_000);
      expect(server.logs.map((line) => line.msg)).not.toContain('punctual is ready');
      expect(server.logs.map((line) => line.msg)).toContain('punctual stopped');
    } finally {
      server.child.kill('SIGKILL');
      await holder.query('SELECT RELEASE_LOCK(?)', [lockName]);
      await holder.end();
    }
  });

  it('ends with exit 0 and never listens, while the boot load waits for a row on the pool', { timeout: 120_000 }, async () => {
    // The boot skips misfired tasks under a row lock: hold that row, so the boot is certainly
    // inside the scheduler's load, on a pooled connection, when the signal comes.
    const own = await createTestDatabase('bootstop_load');
    const shop = await own.pool.getConnection();
    try {
      const inserted = await own.execute(
        "INSERT INTO punctual_tasks (type, payload, run_at, misfire) VALUES ('close_order', '{}', ?, 'skip')",
        [new Date(Date.now() - 3_600_000)],
      );
      await shop.query('BEGIN');
      await shop.query('SELECT id FROM punctual_tasks WHERE id = ? FOR UPDATE', [inserted.insertId]);
      const server = boot({ DATABASE_URL: own.url, LOCK_WAIT_TIMEOUT_S: '60' });
      try {
        await waitFor(
          async () => {
            const [rows] = await shop.query<mysql.RowDataPacket[]>(
              'SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND DB = ? AND INFO LIKE ?',
              [own.name, '%FOR UPDATE%'],
            );
            return Number(rows[0]?.n) > 0;
          },
          60_000,
          'the boot load to wait for the row',
        );
        const asked = Date.now();
        server.child.kill('SIGTERM');
        expect(await server.exited).toBe(0);
        // Not held up by the boot's lock wait (60 s): STOP_TIMEOUT_MS (3 s) and the exit.
        expect(Date.now() - asked).toBeLessThan(30_000);
        expect(server.logs.map((line) => line.msg)).not.toContain('punctual is ready');
      } finally {
        server.child.kill('SIGKILL');
      }
    } finally {
      await shop.query('ROLLBACK').catch(() => undefined);
      shop.release();
      await own.drop();
    }
  });

  it('ends with exit 0 wherever in the boot the signal lands', { timeout: 120_000 }, async () => {
    for (const delayMs of [0, 50, 150, 300]) {
      const server = boot({});
      try {
        // From the start of the boot (the signal handlers are installed by then).
        await waitFor(async () => server.logs.some((line) => line.msg === 'booting'), 20_000, 'the boot to begin');
        await new Promise((resolve) => setTimeout(resolve, delayMs));
        server.child.kill('SIGTERM');
        const code = await server.exited;
        expect({ delayMs, code, logs: code === 0 ? [] : server.logs.map((line) => line.msg) }).toEqual({ delayMs, code: 0, logs: [] });
      } finally {
        server.child.kill('SIGKILL');
      }
    }
  });
});
