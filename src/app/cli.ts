/**
 * The `punctual` command (bin/punctual.mjs): `start` (also what no command means) runs the
 * service as `npm start` does; the others are an operator's tools:
 *
 * - `migrate [--dry-run]`: applies the migrations the database lacks, or prints their statements;
 * - `doctor`: what punctual needs of its database, a line each (cli-doctor.ts); exit 1 on a fault;
 * - `tasks ls|get|cancel|retry`: through the running service's API, as a client (cli-api.ts);
 * - `export`, `import` (JSON lines, a Redis ZSET, an async_task table): cli-transfer.ts;
 * - `receiver`: a webhook receiver that prints each call, to try punctual with (cli-receiver.ts).
 *
 * Every command answers `--help` and `--version` without touching anything. The configuration
 * is the service's own (the same environment), read when a command needs it; a bad value is one
 * line and exit 1.
 */
import { Command, CommanderError, Option } from 'commander';
import mysql from 'mysql2/promise';
import { ensureDatabase, freshConnections } from '../db/connection.js';
import { lastRecordedMigration, migrateDatabase, migrationStatus } from '../db/migrate.js';
import { readMigrations } from '../db/migration-files.js';
import { createLogger } from '../observability/log.js';
import { autocommit } from '../db/transaction.js';
import { VERSION } from '../observability/metrics.js';
import { redactCredentials } from '../observability/redact.js';
import { printable, printableJson } from '../util/printable.js';
import { Api, CliError } from './cli-api.js';
import { doctor } from './cli-doctor.js';
import { receive } from './cli-receiver.js';
import { exportPending, fromAsyncTask, fromJsonLines, fromZset, importItems } from './cli-transfer.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { MAX_LIST_PAGE } from '../contract/limits.js';

const out = (line: string) => process.stdout.write(`${line}\n`);

function config(): Config {
  return loadConfig(process.env);
}

/** The statements of the migrations the database has not applied, by file, in order. */
export async function pendingMigrations(settings: Config['database']): Promise<{ file: string; statements: string[] }[]> {
  const { url, name } = settings;
  return autocommit(freshConnections(url, { timezone: 'Z' }, '/', settings), async (conn) => {
    const [[server]] = await conn.query<mysql.RowDataPacket[]>('SELECT VERSION() AS version');
    const last = await lastRecordedMigration(conn, name);
    return readMigrations(String(server?.version))
      .filter((migration) => migration.when > last)
      .map((migration) => ({ file: `${migration.tag}.sql`, statements: migration.statements }));
  });
}

interface TaskLine {
  id: number;
  key: string | null;
  type: string;
  status: string;
  runAt: string;
  attempts: number;
  maxAttempts: number;
  lastError: string | null;
}

function taskLine(task: TaskLine): string {
  const error = task.lastError === null ? '' : `  ${printable(task.lastError.slice(0, 80))}`;
  const key = task.key === null ? '-' : printable(task.key);
  return `${String(task.id).padStart(8)}  ${printable(task.status).padEnd(9)}  ${printable(task.runAt)}  ${printable(task.type)}  ${key}  ${task.attempts}/${task.maxAttempts}${error}`;
}

/** `42` → /tasks/42; `key:close_order:SN1` → /tasks/by-key/…; anything else is an error. */
function taskPath(ref: string): string {
  if (/^\d{1,16}$/.test(ref)) return `/tasks/${ref}`;
  if (ref.startsWith('key:') && ref.length > 4) return `/tasks/by-key/${encodeURIComponent(ref.slice(4))}`;
  throw new CliError(`${ref} is neither a task id nor key:<key>`);
}

export function program(): Command {
  const root = new Command('punctual')
    .description('punctual: a one-shot timer service. With no command, starts the service (as `punctual start`).')
    .version(VERSION, '-V, --version')
    .showHelpAfterError()
    .exitOverride();
  const command = (name: string, description: string) =>
    root.command(name).description(description).version(VERSION, '-V, --version').exitOverride().showHelpAfterError();

  command('start', 'start the service (the configuration is the environment: docs/configuration.md)')
    .option('--test-clock', "for a shop's tests only: time moves only through POST /test/clock (as TEST_CLOCK=on)")
    .action(async (options: { testClock?: boolean }) => {
      if (options.testClock) process.env.TEST_CLOCK = 'on';
      await import('./main.js');
    });

  command('migrate', 'apply the migrations the database lacks (the service also does at start)')
    .option('--dry-run', 'print the statements that would run, and change nothing')
    .option('--status', 'list the migrations applied and pending, and change nothing')
    .action(async (options: { dryRun?: boolean; status?: boolean }) => {
      const settings = config().database;
      if (options.status) {
        const { migrations, unknown } = await migrationStatus(settings.url, settings.name, settings);
        for (const migration of migrations) out(`${migration.applied ? 'applied' : 'pending'}  ${migration.tag}`);
        const pending = migrations.filter((migration) => !migration.applied).length;
        out(pending === 0 ? `${settings.name} is up to date` : `${settings.name}: ${pending} pending`);
        if (unknown > 0) out(`${settings.name} also records ${unknown} migration(s) of a newer release`);
        return;
      }
      const pending = await pendingMigrations(settings);
      if (options.dryRun) {
        if (pending.length === 0) out(`-- ${settings.name} is up to date: nothing to apply`);
        for (const migration of pending) {
          out(`-- ${migration.file}`);
          for (const statement of migration.statements) out(`${statement.replace(/;?\s*$/, '')};`);
        }
        return;
      }
      await ensureDatabase(settings.url, settings.name, settings);
      // Each migration applied is a log line (JSON, as the service's), then the summary.
      const log = createLogger(config().service.logLevel);
      const controller = new AbortController();
      const stop = () => controller.abort();
      process.once('SIGTERM', stop).once('SIGINT', stop);
      try {
        await migrateDatabase(settings.url, settings.name, settings, { log, signal: controller.signal });
      } finally {
        process.off('SIGTERM', stop).off('SIGINT', stop);
      }
      out(
        pending.length === 0
          ? `${settings.name} is up to date: nothing to apply`
          : `applied ${pending.length} migration(s) to ${settings.name}`,
      );
    });

  command('doctor', "check what punctual needs of its database: version, time zones, clock, grants, Galera's suspect timeout").action(
    async () => {
      const checks = await doctor(config());
      for (const check of checks) out(`${check.ok ? (check.warn ? 'warn' : 'ok  ') : 'FAIL'}  ${check.name}: ${check.says}`);
      if (checks.some((check) => !check.ok)) process.exitCode = 1;
    },
  );

  const tasks = command('tasks', 'list, read, cancel and retry tasks through the running service (PUNCTUAL_URL or HOST/PORT, API_TOKEN)');
  const sub = (name: string, description: string) =>
    tasks.command(name).description(description).version(VERSION, '-V, --version').exitOverride().showHelpAfterError();
  sub('ls', 'list tasks: pending ones soonest first, or the latest to finish with --status')
    .addOption(
      new Option('--status <status>', 'which tasks').choices(['pending', 'done', 'failed', 'cancelled', 'skipped']).default('pending'),
    )
    .option('--type <type>', 'tasks of this type')
    .option('--tag <tag>', 'tasks with this tag')
    .option('--limit <n>', 'at most this many', '50')
    .option('--json', 'one JSON object a line')
    .action(async (options: { status: string; type?: string; tag?: string; limit: string; json?: boolean }) => {
      const api = new Api(process.env);
      const limit = Number(options.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new CliError('--limit must be an integer from 1 to 1000');
      const search = new URLSearchParams({ limit: String(limit) });
      let path: string;
      if (options.type !== undefined) search.set('type', options.type);
      if (options.tag !== undefined) search.set('tag', options.tag);
      if (options.status === 'pending') path = `/tasks/pending?${search.toString()}`;
      else {
        // The latest to finish first, filtered as the API filters any status.
        search.set('status', options.status);
        search.set('limit', String(Math.min(limit, MAX_LIST_PAGE)));
        path = `/tasks?${search.toString()}`;
      }
      const { body } = await api.call<{ tasks: TaskLine[] }>('GET', path);
      for (const task of body.tasks) out(options.json ? printableJson(JSON.stringify(task)) : taskLine(task));
    });
  sub('get', 'one task, with its runs: `punctual tasks get 42` or `punctual tasks get key:close_order:SN1`')
    .argument('<task>', 'an id, or key:<key>')
    .action(async (ref: string) => {
      const api = new Api(process.env);
      const { body: task } = await api.call<TaskLine>('GET', taskPath(ref));
      const { body: runs } = await api.call<{ runs: unknown[] }>('GET', `/tasks/${task.id}/runs?limit=100`);
      out(printableJson(JSON.stringify({ ...task, runs: runs.runs }, null, 2)));
    });
  sub('cancel', 'cancel a pending task (by id or key:<key>)')
    .argument('<task>', 'an id, or key:<key>')
    .action(async (ref: string) => {
      const { body } = await new Api(process.env).call<TaskLine>('POST', `${taskPath(ref)}/cancel`);
      out(taskLine(body));
    });
  sub('retry', 'run a failed task again, now')
    .argument('<id>', 'the task id')
    .action(async (id: string) => {
      if (!/^\d{1,16}$/.test(id)) throw new CliError(`${id} is not a task id`);
      const { body } = await new Api(process.env).call<TaskLine>('POST', `/tasks/${id}/retry`, {});
      out(taskLine(body));
    });

  command('export', 'write every pending task as JSON lines (create requests, keys kept), from the database DATABASE_URL names').action(
    async () => {
      // A key or payload may hold what a terminal acts on (8-bit CSI, bidi overrides); escaped, each line is still the same JSON.
      const count = await exportPending(config(), (line) => out(printableJson(line)));
      process.stderr.write(`exported ${count} pending task(s)\n`);
    },
  );

  command(
    'import',
    'create tasks through the running service from JSON lines, a Redis ZSET or an async_task table; a repeat creates nothing twice',
  )
    .argument('[file]', 'JSON lines as `punctual export` writes them (`-`: stdin)')
    .option(
      '--from-zset <source>',
      'a Redis sorted set of order numbers scored by due time (epoch seconds, or milliseconds): redis://host:6379/0#queue:order:timeout',
    )
    .option('--type <type>', 'the task type of what --from-zset or --from-async-task reads')
    .option(
      '--allow-types <types>',
      "--from-async-task: instead of --type, the table's own types let through (comma-separated); other rows are refused",
    )
    .option('--field <name>', 'the payload field a --from-zset member goes in', 'orderSn')
    .option(
      '--from-async-task <source>',
      "the pending rows (status 0) of a PHP shop's async_task table (id, type, params, execute_time, status): mysql://user@host:3306/shop#async_task",
    )
    .action(
      async (
        file: string | undefined,
        options: { fromZset?: string; type?: string; allowTypes?: string; field: string; fromAsyncTask?: string },
      ) => {
        const sources = [file, options.fromZset, options.fromAsyncTask].filter((source) => source !== undefined);
        if (sources.length !== 1) throw new CliError('import takes one source: a file, --from-zset or --from-async-task');
        if (options.fromZset !== undefined && options.type === undefined)
          throw new CliError('--from-zset needs --type (e.g. --type close_order)');
        // The dump's own type column never picks a handler by itself: the operator names it, or the ones let through.
        if (options.fromAsyncTask !== undefined && (options.type === undefined) === (options.allowTypes === undefined))
          throw new CliError(
            '--from-async-task needs --type (every row becomes that type) or --allow-types (the table types let through), one of them',
          );
        const allowTypes = (options.allowTypes ?? '')
          .split(',')
          .map((type) => type.trim())
          .filter((type) => type !== '');
        const api = new Api(process.env);
        const items =
          options.fromZset !== undefined
            ? fromZset(options.fromZset, options.type!, options.field)
            : options.fromAsyncTask !== undefined
              ? fromAsyncTask(options.fromAsyncTask, options.type !== undefined ? { type: options.type } : { allowTypes })
              : fromJsonLines(file!);
        // An order's key (a ZSET member, an async_task id) names its close: held with another time, it is there already.
        const counts = await importItems(api, items, { keyNamesTheWork: file === undefined });
        for (const refusal of counts.refusals.slice(0, 20)) process.stderr.write(`refused ${printable(refusal)}\n`);
        if (counts.refusals.length > 20) process.stderr.write(`… and ${counts.refusals.length - 20} more refused\n`);
        const other = counts.otherContent === 0 ? '' : ` (${counts.otherContent} of them with another time or payload, kept as they are)`;
        out(`created ${counts.created}, already there ${counts.repeated}${other}, refused ${counts.refused}`);
        if (counts.refused > 0) process.exitCode = 1;
      },
    );
  command('receiver', 'a webhook receiver to try punctual with: prints each call it gets, checks its signature with WEBHOOK_SECRET')
    .option('--host <host>', 'the address to listen on', '127.0.0.1')
    .option('--port <port>', 'the port to listen on', '4000')
    .option('--status <code>', 'the status to answer with (a 5xx or 429 to watch punctual retry)', '200')
    .action(async (options: { host: string; port: string; status: string }) => {
      const port = Number(options.port);
      const status = Number(options.status);
      if (!Number.isInteger(port) || port < 0 || port > 65535) throw new CliError('--port must be an integer from 0 to 65535');
      if (!Number.isInteger(status) || status < 200 || status > 599) throw new CliError('--status must be an HTTP status from 200 to 599');
      await receive({ host: options.host, port, status }, out);
    });
  return root;
}

/** Runs the command line `argv` (without node and the script); never throws: says why on stderr and sets the exit code. */
export async function runCli(argv: string[]): Promise<void> {
  try {
    await program().parseAsync(argv, { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end here with code 0; commander printed what it had to say.
      process.exitCode = error.exitCode;
      return;
    }
    const message = error instanceof CliError || error instanceof ConfigError ? error.message : (error as Error).message;
    // The API's messages quote what they refused (a key, a type): escaped as the task lines are.
    process.stderr.write(`punctual: ${printable(redactCredentials(message))}\n`);
    process.exitCode = 1;
  }
}
