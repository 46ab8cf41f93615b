import { spawn } from 'node:child_process';
import { statSync, utimesSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startServer } from '../helpers/server.js';

// npm run demo runs scripts/demo.mjs: the demo compiled (into dist-demo/), compiled only when stale.
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DEMO = fileURLToPath(new URL('../../scripts/demo.mjs', import.meta.url));
const BUILT = fileURLToPath(new URL('../../dist-demo/scripts/demo.js', import.meta.url));
const SOURCE = fileURLToPath(new URL('../../scripts/demo.ts', import.meta.url));
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('demo');
});

afterAll(async () => {
  await db?.drop();
});

function demo(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [DEMO], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env } });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('exit', (code) => resolve({ code, output }));
  });
}

describe('npm run demo', () => {
  it('sets up a demo shop, closes its orders on time through the running service, and checks the stock', async () => {
    const token = 'demo-token-0123456789abcd';
    const server = await startServer({ env: { DATABASE_URL: db.url, API_TOKEN: token } });
    try {
      const run = await demo({
        PUNCTUAL_URL: server.baseUrl,
        API_TOKEN: token,
        DATABASE_URL: db.url,
        DEMO_TASKS: '300',
        DEMO_SECONDS: '3',
      });
      expect(run.output).toContain('demo shop ready: 300 unpaid orders');
      expect(run.output).toContain('scheduled 300 close_order tasks due over the next 3 s');
      expect(run.output).toContain('300/300 closed');
      expect(run.output).toMatch(/finish lateness \(closed_at − run_at\): p50 \d+ ms, p99 \d+ ms, max \d+ ms, early 0/);
      // The start's figures are the run history's, on the same runs: the same numbers the test reads there.
      const [rows] = await db.pool.query<any[]>(
        "SELECT lateness_ms AS ms FROM punctual_tasks WHERE task_key LIKE 'demo:%' AND status = 'done' AND done_by IS NOT NULL",
      );
      const start = rows.map((row) => Number(row.ms)).sort((a, b) => a - b);
      expect(start).toHaveLength(300);
      const at = (q: number) => start[Math.min(start.length - 1, Math.ceil(q * start.length) - 1)];
      expect(run.output).toContain(
        `start lateness (run start − run_at − wait, as the dashboard and the metrics count it): p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${at(1)} ms`,
      );
      expect(run.output).toContain('waits for a pause or a limit: none');
      // The metrics counted the same runs, with the same start lateness (within a bucket).
      const text = await (await fetch(`${server.baseUrl}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text();
      const series = (name: string) => Number(new RegExp(`^${name}\\{type="close_order"\\} (\\S+)$`, 'm').exec(text)?.[1]);
      expect(series('punctual_task_lateness_seconds_count')).toBe(300);
      expect(series('punctual_task_lateness_seconds_sum')).toBeCloseTo(start.reduce((sum, ms) => sum + Math.max(0, ms), 0) / 1000, 2);
      expect(run.output).toContain('stock adds up');
      expect(run.code).toBe(0);
      // A second run starts over with its own orders.
      expect(
        (await demo({ PUNCTUAL_URL: server.baseUrl, API_TOKEN: token, DATABASE_URL: db.url, DEMO_TASKS: '30', DEMO_SECONDS: '1' })).code,
      ).toBe(0);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it("leaves a shop's real tables alone", async () => {
    await db.execute('DROP TABLE IF EXISTS orders');
    await db.execute('CREATE TABLE orders (id INT PRIMARY KEY)');
    const server = await startServer({ env: { DATABASE_URL: db.url } });
    try {
      const run = await demo({ PUNCTUAL_URL: server.baseUrl, DATABASE_URL: db.url, DEMO_TASKS: '10', DEMO_SECONDS: '1' });
      expect(run.code).toBe(1);
      expect(run.output).toContain('already has a table orders that is not the demo');
    } finally {
      await server.stop();
    }
  });

  it('says so when punctual is not running', async () => {
    const run = await demo({ PUNCTUAL_URL: 'http://127.0.0.1:9', DATABASE_URL: db.url });
    expect(run.code).toBe(1);
    expect(run.output).toContain('punctual does not answer at http://127.0.0.1:9: start it first');
  });

  it('finds the service on the PORT it listens on, without PUNCTUAL_URL', async () => {
    await db.execute('DROP TABLE IF EXISTS orders'); // the shop's table of the test before
    const server = await startServer({ env: { DATABASE_URL: db.url } });
    try {
      const port = new URL(server.baseUrl).port;
      const run = await demo({ PORT: port, DATABASE_URL: db.url, DEMO_TASKS: '20', DEMO_SECONDS: '1' });
      expect(run.output).toContain('20/20 closed');
      expect(run.code).toBe(0);
      // And says where it looked when nothing answers there.
      expect((await demo({ PORT: '9', DATABASE_URL: db.url })).output).toContain('punctual does not answer at http://127.0.0.1:9');
    } finally {
      await server.stop();
    }
  });

  it('compiles itself only when its sources changed since its build', async () => {
    // Made stale on purpose: the next run builds, and says so.
    const touched = new Date();
    utimesSync(SOURCE, touched, touched);
    const first = await demo({ PUNCTUAL_URL: 'http://127.0.0.1:9', DATABASE_URL: db.url });
    expect(first.output).toContain('building the demo first (its sources changed since its last build)');
    const built = statSync(BUILT).mtimeMs;
    // Current: the next run starts at once, the build untouched.
    const second = await demo({ PUNCTUAL_URL: 'http://127.0.0.1:9', DATABASE_URL: db.url });
    expect(second.output).not.toContain('building the demo');
    expect(second.output).toContain('punctual does not answer');
    expect(statSync(BUILT).mtimeMs).toBe(built);
  });
});
