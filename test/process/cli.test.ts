/**
 * The `punctual` command as a process (bin/punctual.mjs on the built dist/), against real MariaDB
 * and Redis: --help and --version on every command start nothing; migrate --dry-run prints and
 * changes nothing; doctor reports; tasks ls/get/cancel/retry go through the running service;
 * export and import carry the pending work over with its keys, and a repeat creates nothing; a
 * shop's Redis ZSET (scored in seconds or milliseconds) and async_task table come over the same way.
 */
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startServer, waitFor, type ServerProcess } from '../helpers/server.js';
import { punctual } from '../helpers/cli.js';
import { freePort } from '../helpers/brokers.js';
import { migrationJournal } from '../../src/db/migration-files.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const TOKEN = 'cli-test-token-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };

let source: TestDatabase;
let target: TestDatabase;
let server: ServerProcess;
let env: Record<string, string>;

beforeAll(async () => {
  source = await createTestDatabase('cli_source');
  target = await createTestDatabase('cli_target');
  server = await startServer({ env: { DATABASE_URL: source.url, API_TOKEN: TOKEN } });
  env = { DATABASE_URL: source.url, PUNCTUAL_URL: server.baseUrl, API_TOKEN: TOKEN };
});

afterAll(async () => {
  await server?.stop();
  await source?.drop();
  await target?.drop();
});

describe('punctual --help and --version', () => {
  const commands = [
    [],
    ['start'],
    ['migrate'],
    ['doctor'],
    ['tasks'],
    ['tasks', 'ls'],
    ['tasks', 'get'],
    ['tasks', 'cancel'],
    ['tasks', 'retry'],
    ['export'],
    ['import'],
    ['receiver'],
  ];
  it('answer on every command, exit 0 and start nothing', async () => {
    for (const command of commands) {
      const help = await punctual([...command, '--help'], { DATABASE_URL: 'mysql://root@127.0.0.1:9/none' });
      expect(help.code, command.join(' ')).toBe(0);
      expect(help.stdout, command.join(' ')).toContain(`Usage: punctual${command.length > 0 ? ` ${command.join(' ')}` : ''}`);
      expect(help.stdout).not.toContain('punctual is ready');
      const version = await punctual([...command, '--version']);
      expect(version.code, command.join(' ')).toBe(0);
      expect(version.stdout.trim()).toBe(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
    }
  }, 300_000);

  it('refuses an unknown command with exit 1 and the usage', async () => {
    const run = await punctual(['frobnicate']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("unknown command 'frobnicate'");
  });
});

describe('punctual migrate and doctor', () => {
  it('migrate --dry-run prints the statements and changes nothing; migrate applies them; a second dry run has nothing', async () => {
    const name = `punctual_cli_${randomBytes(4).toString('hex')}`;
    const url = `mysql://root@127.0.0.1:3306/${name}`;
    const admin = await mysql.createConnection({ uri: 'mysql://root@127.0.0.1:3306' });
    try {
      const dry = await punctual(['migrate', '--dry-run'], { DATABASE_URL: url });
      expect(dry.code).toBe(0);
      expect(dry.stdout).toContain('-- 0000_tasks.sql');
      expect(dry.stdout).toContain('CREATE TABLE `punctual_task_runs`');
      expect(dry.stdout).toContain('CREATE TABLE `punctual_audit_log`');
      const [schemas] = await admin.query<mysql.RowDataPacket[]>('SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?', [name]);
      expect(schemas).toHaveLength(0);
      const pending = await punctual(['migrate', '--status'], { DATABASE_URL: url });
      expect(pending.stdout).toMatch(/^pending {2}0000_tasks$/m);
      expect(pending.stdout).toContain(`${name}: ${migrationJournal().length} pending`);
      const applied = await punctual(['migrate'], { DATABASE_URL: url });
      expect(applied.stdout).toMatch(/applied \d+ migration\(s\)/);
      // One log line a migration, with its time.
      const lines = applied.stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line));
      expect(lines.filter((line) => line.msg === 'migration applied').map((line) => line.migration)).toEqual(
        migrationJournal().map((entry) => entry.tag),
      );
      expect(lines.find((line) => line.msg === 'migration applied')).toMatchObject({ ms: expect.any(Number), statements: 2 });
      const status = await punctual(['migrate', '--status'], { DATABASE_URL: url });
      expect(status.stdout).toMatch(/^applied {2}0024_done_by$/m);
      expect(status.stdout).toContain(`${name} is up to date`);
      const [tables] = await admin.query<mysql.RowDataPacket[]>('SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?', [
        name,
      ]);
      expect(tables.map((row) => row.TABLE_NAME)).toContain('punctual_task_runs');
      expect((await punctual(['migrate', '--dry-run'], { DATABASE_URL: url })).stdout).toContain('is up to date: nothing to apply');
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await admin.end();
    }
  }, 120_000);

  it("doctor checks close_order's tables as CLOSE_ORDER maps them, and each procedure of PROCEDURES", async () => {
    await target.execute('CREATE TABLE shop_order (sn VARCHAR(32) PRIMARY KEY, state TINYINT NOT NULL)');
    await target.execute('CREATE PROCEDURE doctor_proc(IN order_sn VARCHAR(32)) BEGIN SELECT order_sn; END');
    // Unset: the write-ups' tables, which this shop lacks: a warning, not a failure.
    const unset = await punctual(['doctor'], { DATABASE_URL: target.url });
    expect(unset.stdout).toMatch(/^warn\s+close_order: Table '\S+orders' doesn't exist .*set CLOSE_ORDER/m);
    const mapped = { table: 'shop_order', key: 'sn', status: 'state', unpaid: 0, closed: 9, closedAt: null, stock: null };
    const good = await punctual(['doctor'], {
      DATABASE_URL: target.url,
      CLOSE_ORDER: JSON.stringify(mapped),
      PROCEDURES: 'close_by_proc=doctor_proc',
    });
    expect(good.stdout).toMatch(/^ok\s+close_order: `shop_order`: the columns and grants close_order uses are there/m);
    expect(good.stdout).toMatch(/^ok\s+procedure close_by_proc: \S+\.doctor_proc: found, with EXECUTE/m);
    const wrong = await punctual(['doctor'], {
      DATABASE_URL: target.url,
      CLOSE_ORDER: JSON.stringify({ ...mapped, closedAt: 'closed_time' }),
      PROCEDURES: 'gone=no_such_proc',
    });
    expect(wrong.code).toBe(1);
    expect(wrong.stdout).toMatch(/^FAIL\s+close_order: Unknown column 'closed_time'.*fix CLOSE_ORDER/m);
    expect(wrong.stdout).toMatch(/^FAIL\s+procedure gone: \S+\.no_such_proc does not exist/m);
  }, 120_000);

  it('doctor says what it checked, and exits 1 when the database does not answer', async () => {
    const run = await punctual(['doctor'], { DATABASE_URL: source.url, LEASE_MS: '5000' });
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^ok\s+database: answers/m);
    expect(run.stdout).toMatch(/^ok\s+version: /m);
    expect(run.stdout).toMatch(/time-zone tables: /);
    // Its size and side, or the same: never a negative number of ms.
    expect(run.stdout).toMatch(/clock: the database's clock (is \d+ ms (ahead of|behind)|reads the same as) this machine's/);
    expect(run.stdout).toMatch(/^ok\s+grants to run: SELECT, INSERT, UPDATE, DELETE on /m);
    expect(run.stdout).toMatch(/^ok\s+migrations: up to date$/m);
    expect(run.stdout).toMatch(/galera: /);
    const down = await punctual(['doctor'], { DATABASE_URL: 'mysql://root:hunter2@127.0.0.1:9/punctual' });
    expect(down.code).toBe(1);
    expect(down.stdout).toMatch(/^FAIL\s+database: does not answer/m);
    expect(down.stdout + down.stderr).not.toContain('hunter2');
  }, 120_000);
});

describe('punctual tasks', () => {
  it('lists, reads (with its runs), cancels and retries through the running service', async () => {
    const created = await server.request(
      'POST',
      '/tasks',
      { type: 'close_order', payload: { orderSn: 'CLI1' }, delayMs: 3_600_000, key: 'cli:ls:1', tags: ['cli'] },
      auth,
    );
    expect(created.status).toBe(201);
    const id = created.body.id as number;
    const ls = await punctual(['tasks', 'ls', '--tag', 'cli'], env);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toContain('cli:ls:1');
    expect(ls.stdout).toMatch(new RegExp(`^\\s*${id}\\s+pending`, 'm'));
    const get = await punctual(['tasks', 'get', 'key:cli:ls:1'], env);
    expect(JSON.parse(get.stdout)).toMatchObject({ id, key: 'cli:ls:1', status: 'pending', runs: [] });
    const cancel = await punctual(['tasks', 'cancel', String(id)], env);
    expect(cancel.code).toBe(0);
    expect(cancel.stdout).toMatch(/cancelled/);
    // The service's answer, as the API gives it: not pending any more.
    const again = await punctual(['tasks', 'cancel', String(id)], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('answered 409');
    expect((await punctual(['tasks', 'ls', '--status', 'cancelled', '--json'], env)).stdout).toContain(`"id":${id}`);
    // A failed task run again (this database has no shop tables: close_order fails).
    const failing = await server.request(
      'POST',
      '/tasks',
      { type: 'close_order', payload: { orderSn: 'CLI-FAIL' }, delayMs: 0, maxAttempts: 1 },
      auth,
    );
    expect(failing.status).toBe(201);
    await waitFor(async () => (await server.request('GET', `/tasks/${failing.body.id}`, undefined, auth)).body.status === 'failed', 15_000);
    const retry = await punctual(['tasks', 'retry', String(failing.body.id)], env);
    expect(retry.code).toBe(0);
    expect(retry.stdout).toMatch(/pending|failed|running|done/);
    // Without the token: the API's refusal, in one line.
    const refused = await punctual(['tasks', 'ls'], { ...env, API_TOKEN: 'a-wrong-token-0123456789' });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('answered 401');
    expect((await punctual(['tasks', 'get', 'nonsense'], env)).stderr).toContain('neither a task id nor key:');
  }, 120_000);

  it("lists finished tasks by type and tag as the API filters them; a task's text never reaches the terminal raw", async () => {
    // A key that would clear the screen, write the clipboard (OSC 52), move the cursor (8-bit CSI) and forge a row.
    const hostile = 'cli:x\u001b[2J\u001b]52;c;ZXZpbA==\u0007\u009b6n\u202e\n   424242  done   forged';
    const created = await server.request(
      'POST',
      '/tasks',
      { type: 'close_order', payload: { orderSn: 'CLI-ESC\u001b[31m' }, delayMs: 0, maxAttempts: 1, key: hostile, tags: ['cli-esc'] },
      auth,
    );
    expect(created.status).toBe(201);
    const id = created.body.id as number;
    await waitFor(async () => (await server.request('GET', `/tasks/${id}`, undefined, auth)).body.status === 'failed', 15_000);
    const outputs = [
      await punctual(['tasks', 'ls', '--status', 'failed', '--type', 'close_order'], env),
      await punctual(['tasks', 'ls', '--status', 'failed', '--tag', 'cli-esc', '--json'], env),
      await punctual(['tasks', 'get', String(id)], env),
    ];
    for (const { code, stdout } of outputs) {
      expect(code).toBe(0);
      expect(stdout).toMatch(new RegExp(`\\b${id}\\b`));
      // eslint-disable-next-line no-control-regex -- control characters are what must not be there
      expect(stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
      expect(stdout).not.toMatch(/^\s*424242/m); // no forged row
    }
    // The table is one line per task, the key shown escaped; the JSON still parses to the key itself.
    expect(outputs[0]!.stdout).toContain('cli:x\\u001b[2J\\u001b]52;c;ZXZpbA==\\u0007\\u009b6n\\u202e\\u000a');
    const line = outputs[1]!.stdout.trim().split('\n');
    expect(line).toHaveLength(1);
    expect(JSON.parse(line[0]!)).toMatchObject({ id, key: hostile, status: 'failed' });
    expect(JSON.parse(outputs[2]!.stdout)).toMatchObject({ id, key: hostile });
    // Filtered: a failed task of another type is not listed.
    expect((await punctual(['tasks', 'ls', '--status', 'failed', '--type', 'webhook'], env)).stdout).not.toContain(String(id));
  }, 120_000);
});

describe('punctual export and import', () => {
  it('carry the pending tasks over with their keys, and a repeat creates nothing', async () => {
    for (const [i, key] of ['cli:x:1', 'cli:x:2', undefined].entries()) {
      const body = {
        type: 'close_order',
        payload: { orderSn: `EX${i}` },
        delayMs: 7_200_000 + i,
        key,
        tags: ['moving'],
        priority: 5 + i,
        expireAfterMs: 60_000,
        group: `merchant-${i}`,
      };
      expect((await server.request('POST', '/tasks', body, auth)).status).toBe(201);
    }
    const exported = await punctual(['export'], { DATABASE_URL: source.url });
    expect(exported.code).toBe(0);
    const lines = exported.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const moving = lines.filter((line) => line.tags?.includes('moving'));
    expect(moving).toHaveLength(3);
    expect(moving.map((line) => line.key).sort()).toEqual(['cli:x:1', 'cli:x:2', undefined].sort());
    // Every field a task carries comes along.
    for (const line of moving)
      expect(line).toMatchObject({ priority: expect.any(Number), expireAfterMs: 60_000, group: expect.stringMatching(/^merchant-/) });
    expect(moving.find((line) => line.key === 'cli:x:2')).toMatchObject({ priority: 6, group: 'merchant-1' });

    // Imported into the service it came from, it creates nothing: the keyless task is found by its id there.
    const dir0 = mkdtempSync(join(tmpdir(), 'punctual-cli-'));
    try {
      const all = join(dir0, 'all.jsonl');
      writeFileSync(all, exported.stdout);
      const back = await punctual(['import', all], env);
      expect(back.stdout).toContain(`created 0, already there ${lines.length}, refused 0`);
    } finally {
      rmSync(dir0, { recursive: true, force: true });
    }

    const other = await startServer({ env: { DATABASE_URL: target.url, API_TOKEN: TOKEN } });
    const dir = mkdtempSync(join(tmpdir(), 'punctual-cli-'));
    try {
      const file = join(dir, 'pending.jsonl');
      writeFileSync(file, moving.map((line) => JSON.stringify(line)).join('\n') + '\n');
      const to = { PUNCTUAL_URL: other.baseUrl, API_TOKEN: TOKEN };
      const first = await punctual(['import', file], to);
      expect(first.stdout).toContain('created 3, already there 0, refused 0');
      const second = await punctual(['import', '-'], to, readFileSync(file, 'utf8'));
      expect(second.stdout).toContain('created 0, already there 3, refused 0');
      expect((await other.request('GET', '/tasks/by-key/cli%3Ax%3A1', undefined, auth)).body).toMatchObject({
        payload: { orderSn: 'EX0' },
        priority: 5,
        expireAfterMs: 60_000,
        group: 'merchant-0',
      });
      const [count] = await target.query<any>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'pending'");
      expect(Number(count.n)).toBe(3);
      // A bad line is named, and the others still go in.
      writeFileSync(
        file,
        '{"type":"close_order","payload":{"orderSn":"B1"},"delayMs":1000,"key":"cli:bad:ok"}\n{"type":"no_such_type","delayMs":1}\n',
      );
      const bad = await punctual(['import', file], to);
      expect(bad.code).toBe(1);
      expect(bad.stdout).toContain('created 1, already there 0, refused 1');
      expect(bad.stderr).toMatch(/refused line 2: 400/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await other.stop();
    }
  }, 120_000);

  it("writes a task's text escaped, on stdout and in errors, and the escaped lines import as the same tasks", async () => {
    // 8-bit CSI, a bidi override, a line separator: JSON.stringify leaves them raw, a terminal acts on them.
    const hostile = 'cli:exp\u009b2J\u202eevil\u2028\u0085x';
    const body = {
      type: 'close_order',
      payload: { orderSn: 'EXP\u009b31m\u2066' },
      delayMs: 7_200_000,
      key: hostile,
      tags: ['esc-export'],
    };
    expect((await server.request('POST', '/tasks', body, auth)).status).toBe(201);
    const exported = await punctual(['export'], { DATABASE_URL: source.url });
    expect(exported.code).toBe(0);
    // eslint-disable-next-line no-control-regex -- control characters are what must not be there
    expect(exported.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
    const line = exported.stdout
      .trim()
      .split('\n')
      .map((text) => JSON.parse(text))
      .find((task) => task.tags?.includes('esc-export'));
    expect(line).toMatchObject({ key: hostile, payload: { orderSn: 'EXP\u009b31m\u2066' } });
    // The escaped export names the same task: imported again, nothing is created.
    const again = await punctual(['import', '-'], env, exported.stdout);
    expect(again.stdout).toMatch(/created 0, already there \d+, refused 0/);
    // An error quoting the key is escaped too.
    const missing = await punctual(['tasks', 'get', `key:${hostile}-none`], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('404');
    // eslint-disable-next-line no-control-regex -- control characters are what must not be there
    expect(missing.stderr.trimEnd()).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
    expect(missing.stderr).toContain('\\u009b2J\\u202eevil');
  }, 120_000);

  it("brings over a shop's Redis ZSET of order numbers scored by due second, or by due millisecond", async () => {
    const key = `queue:order:timeout:test:${randomBytes(4).toString('hex')}`;
    const redis = new Redis('redis://127.0.0.1:6379/0');
    const due = Math.floor(Date.now() / 1000) + 3600;
    try {
      // PHP's time(), microtime(true), and a shop that scores by Date.now() or microtime(true) * 1000.
      await redis.zadd(key, due, 'SN-Z1', due + 60, 'SN-Z2', due + 120, 'SN-Z3', due + 180.25, 'SN-Z4', (due + 240) * 1000 + 7, 'SN-Z5');
      const source = `redis://127.0.0.1:6379/0#${key}`;
      const first = await punctual(['import', '--from-zset', source, '--type', 'close_order'], env);
      expect(first.stderr).toBe('');
      expect(first.stdout).toContain('created 5, already there 0, refused 0');
      const task = await server.request('GET', '/tasks/by-key/close_order%3ASN-Z2', undefined, auth);
      expect(task.body).toMatchObject({ type: 'close_order', payload: { orderSn: 'SN-Z2' }, status: 'pending' });
      expect(Date.parse(task.body.runAt)).toBe((due + 60) * 1000);
      const runAt = async (member: string) =>
        Date.parse((await server.request('GET', `/tasks/by-key/close_order%3A${member}`, undefined, auth)).body.runAt);
      expect(await runAt('SN-Z4')).toBe((due + 180) * 1000 + 250);
      expect(await runAt('SN-Z5')).toBe((due + 240) * 1000 + 7);
      const again = await punctual(['import', '--from-zset', source, '--type', 'close_order'], env);
      expect(again.stdout).toContain('created 0, already there 5, refused 0');
      // A member whose order punctual holds at another time (the shop's new code gave it one): there already, kept.
      await redis.zadd(key, due + 30, 'SN-Z1');
      const moved = await punctual(['import', '--from-zset', source, '--type', 'close_order'], env);
      expect([moved.code, moved.stderr]).toEqual([0, '']);
      expect(moved.stdout).toContain('created 0, already there 5 (1 of them with another time or payload, kept as they are), refused 0');
      expect(await runAt('SN-Z1')).toBe(due * 1000);
      // A score in neither unit (microseconds) is refused by name, saying how it was read.
      await redis.zadd(key, (due + 300) * 1_000_000, 'SN-Z6');
      const odd = await punctual(['import', '--from-zset', source, '--type', 'close_order'], env);
      expect(odd.code).toBe(1);
      expect(odd.stdout).toContain('created 0, already there 5 (1 of them with another time or payload, kept as they are), refused 1');
      expect(odd.stderr).toMatch(/refused member SN-Z6 \(score \d+, read as epoch milliseconds\): 400 .*10 years/);
      expect((await punctual(['import', '--from-zset', source], env)).stderr).toContain('--from-zset needs --type');
      expect(
        (await punctual(['import', '--from-zset', 'redis://127.0.0.1:6379/0#no-such-key-' + key, '--type', 'close_order'], env)).stderr,
      ).toContain('is not a sorted set');
    } finally {
      await redis.del(key);
      redis.disconnect();
    }
  }, 120_000);

  it.each(['text', 'json'])(
    "brings over the pending rows of a shop's async_task table (params a %s column), by execute_time",
    async (column) => {
      const table = `async_task_${column}_${randomBytes(4).toString('hex')}`;
      await source.execute(`CREATE TABLE \`${table}\` (
      id int unsigned NOT NULL AUTO_INCREMENT, type varchar(50) NOT NULL DEFAULT '', params ${column},
      execute_time int NOT NULL, status tinyint NOT NULL DEFAULT 0, retry_count tinyint NOT NULL DEFAULT 0,
      created_at int NOT NULL DEFAULT 0, updated_at int NOT NULL DEFAULT 0, PRIMARY KEY (id), KEY idx_status_time (status, execute_time))`);
      const due = Math.floor(Date.now() / 1000) + 3600;
      await source.execute(`INSERT INTO \`${table}\` (type, params, execute_time, status) VALUES ?`, [
        [
          ['close_order', JSON.stringify({ orderSn: 'AT1' }), due, 0],
          ['close_order', JSON.stringify({ orderSn: 'AT2' }), due + 30, 0],
          ['close_order', JSON.stringify({ orderSn: 'AT3' }), due - 60, 2], // done there: not moved
          ['webhook', JSON.stringify({ url: 'https://partner.example/hook' }), due + 60, 0], // the dump's type: not a handler it may pick
        ],
      ]);
      const from = `${source.url}#${table}`;
      // The operator chooses: a type for every row, or the table's types let through; never the dump alone.
      expect((await punctual(['import', '--from-async-task', from], env)).stderr).toContain('--from-async-task needs --type');
      const first = await punctual(['import', '--from-async-task', from, '--allow-types', 'close_order'], env);
      expect(first.code).toBe(1);
      expect(first.stdout).toContain('created 2, already there 0, refused 1');
      expect(first.stderr).toMatch(/refused .* id \d+: its type "webhook" is not among --allow-types/);
      const [row] = await source.query<any>(`SELECT id FROM \`${table}\` WHERE params LIKE '%AT2%'`);
      const task = await server.request('GET', `/tasks/by-key/${encodeURIComponent(`${table}:${row.id}`)}`, undefined, auth);
      // The payload whole, from a JSON column (mysql2 hands it over parsed) as from a TEXT one.
      expect(task.body).toMatchObject({ type: 'close_order', payload: { orderSn: 'AT2' } });
      expect(Date.parse(task.body.runAt)).toBe((due + 30) * 1000);
      const again = await punctual(['import', '--from-async-task', from, '--allow-types', 'close_order'], env);
      expect(again.stdout).toContain('created 0, already there 2, refused 1');
      // --type: every row that type (the webhook row's payload is no close_order: refused by the service, by name).
      const typed = await punctual(['import', '--from-async-task', from, '--type', 'close_order'], env);
      expect(typed.stdout).toContain('created 0, already there 2, refused 1');
    },
    120_000,
  );
});

describe('punctual receiver', () => {
  it('prints each call with its attempt, key and signature check, and answers --status: a 503 is called again', async () => {
    const secret = randomBytes(32).toString('hex');
    const port = await freePort();
    const bin = fileURLToPath(new URL('../../bin/punctual.mjs', import.meta.url));
    const receiver = spawn(process.execPath, [bin, 'receiver', '--port', String(port), '--status', '503'], {
      env: { PATH: process.env.PATH ?? '', WEBHOOK_SECRET: secret },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => receiver.once('exit', (code) => resolve(code)));
    const lines: string[] = [];
    createInterface({ input: receiver.stdout }).on('line', (line) => lines.push(line));
    createInterface({ input: receiver.stderr }).on('line', (line) => lines.push(line));
    const db = await createTestDatabase('cli_receiver');
    const hooks = await startServer({
      env: { DATABASE_URL: db.url, WEBHOOK_SECRET: secret, WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${port}`, RETRY_BASE_MS: '100' },
    });
    try {
      await waitFor(
        async () => lines.some((line) => line.includes(`receiving webhooks on http://127.0.0.1:${port}/, answering 503`)),
        15_000,
      );
      expect(lines[0]).toContain('signatures checked with WEBHOOK_SECRET');
      const created = await hooks.request('POST', '/tasks', {
        type: 'webhook',
        payload: { url: `http://127.0.0.1:${port}/orders/R1/close?x=1`, body: { orderSn: 'R1' } },
        delayMs: 0,
        maxAttempts: 2,
      });
      expect(created.status).toBe(201);
      const task = await waitFor(async () => {
        const { body } = await hooks.request('GET', `/tasks/${created.body.id}`);
        return body.status === 'failed' ? body : undefined;
      }, 15_000);
      expect(task.lastHttpStatus).toBe(503);
      const calls = lines.filter((line) => line.includes('POST /orders/R1/close?x=1'));
      expect(calls).toHaveLength(2);
      const key = `Idempotency-Key punctual-${created.body.id}-`;
      expect(calls[0]).toMatch(new RegExp(`task ${created.body.id}  attempt 1  ${key}\\d+  signature ok  \\{"orderSn":"R1"\\}$`));
      expect(calls[1]).toMatch(new RegExp(`task ${created.body.id}  attempt 2  ${key}\\d+  signature ok`));
      expect(calls[0]!.split('  ')[4]).toBe(calls[1]!.split('  ')[4]); // the same key on both attempts
    } finally {
      receiver.kill('SIGINT');
      await hooks.stop();
      await db.drop();
    }
    expect(await exited).toBe(0);
    const bare = await punctual(['receiver', '--port', '70000']);
    expect(bare.code).toBe(1);
    expect(bare.stderr).toContain('--port must be an integer from 0 to 65535');
  }, 60_000);
});
