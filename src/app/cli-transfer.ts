/**
 * `punctual export` and `punctual import`: the pending work as JSON lines, one create request
 * (the body of POST /tasks) a line, with every field a task carries, and back. Export reads the
 * table (DATABASE_URL) so payloads come whole whatever the token; import goes through the running
 * service's POST /tasks/batch, so every line is checked as a create is, timers are armed, and a
 * repeat is harmless: each line has a key (a task's own, or for a task without one a key made from
 * the line), and a key that names the same task again answers 200, not a second task. A task
 * without a key has no key to be found by where it was exported from: its line also says its id
 * there (`exportedId`, which import takes off), and import into that same service finds it by
 * that id (same type, payload and time) instead of making it twice.
 *
 * The two systems a shop moves off (docs/migrating.md) import the same way: `--from-zset
 * redis://host:port/db#queue:order:timeout --type close_order` (member = order number, score = due
 * epoch second, or millisecond when it is 10^11 or more; the key `<type>:<member>`), and
 * `--from-async-task mysql://user@host/shop#async_task` (the rows of status 0, by execute_time; the
 * key `async_task:<id>`, the payload its `params`, a JSON or a text column). The operator says which handler the rows get (`--type`), or which of the table's own
 * types are let through (`--allow-types`): a dump's type column never picks a handler by itself.
 */
import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import mysql from 'mysql2/promise';
import { Database } from '../db/connection.js';
import { TaskStore } from '../store/task-store.js';
import type { Task } from '../store/task-types.js';
import type { CreateTaskBody } from '../contract/tasks.js';
import { MAX_BATCH } from '../contract/limits.js';
import { Api, CliError } from './cli-api.js';
import type { Config } from './config.js';

/** A pending task as the create request that makes it again. */
export function asCreate(task: Task): CreateTaskBody {
  return {
    type: task.type,
    payload: task.payload as Record<string, unknown>,
    ...(task.cron === null ? { runAt: new Date(task.runAt).toISOString() } : { cron: task.cron }),
    timezone: task.timezone,
    ...(task.key === null ? {} : { key: task.key }),
    maxAttempts: task.maxAttempts,
    misfire: task.misfire,
    ...(task.tags.length === 0 ? {} : { tags: task.tags }),
    ...(task.priority === 0 ? {} : { priority: task.priority }),
    ...(task.expireAfterMs === null ? {} : { expireAfterMs: task.expireAfterMs }),
    ...(task.group === null ? {} : { group: task.group }),
  };
}

/** A line of `punctual export`: the create, and for a task without a key its id where it was exported. */
export type ExportLine = CreateTaskBody & { exportedId?: number };

export function exportLineOf(task: Task): ExportLine {
  return { ...asCreate(task), ...(task.key === null ? { exportedId: task.id } : {}) };
}

/** Writes every pending task, soonest first, one JSON line each; answers how many. */
export async function exportPending(config: Config, write: (line: string) => void): Promise<number> {
  const database = Database.fromConfig({ ...config.database, poolSize: 2 });
  const store = new TaskStore(database);
  let count = 0;
  try {
    let after: { runAt: number; id: number } | undefined;
    for (;;) {
      const page = await store.reads.listPendingWithin({ limit: 1000, after, maxBytes: 8 * 1024 * 1024, rowBytes: 0 });
      for (const task of page.tasks) {
        write(JSON.stringify(exportLineOf(task)));
        count++;
      }
      const last = page.tasks[page.tasks.length - 1];
      if (!page.more || last === undefined) return count;
      after = { runAt: last.runAt, id: last.id };
    }
  } finally {
    await database.close();
  }
}

/** A key for a line without one, made from the line: the same line imported again names the same task. */
function keyOf(body: Record<string, unknown>): string {
  return `import:${createHash('sha256').update(JSON.stringify(body)).digest('hex').slice(0, 40)}`;
}

export interface ImportCounts {
  created: number;
  repeated: number;
  /** Of `repeated`: keys that name a task of other content already (its time moved, say), kept as it is. */
  otherContent: number;
  refused: number;
  /** What was refused, a line each: where, and why. */
  refusals: string[];
}

interface BatchAnswer {
  results: { status: number; message?: string }[];
}

/** What a source yields: a create body named `where`, or a line the source itself refuses, with why. */
export interface ImportItem {
  where: string;
  body: Record<string, unknown>;
  refusal?: string;
}

/**
 * Sends `items` (create bodies, each named `where`) through POST /tasks/batch, MAX_BATCH at a time.
 * `keyNamesTheWork`: the source's keys name the work itself (an order's close: `close_order:SN1`,
 * `async_task:42`), so a key punctual holds already with other content (the shop's new code gave
 * it another time, a row the old poller retried later) is that work there already, not a refusal.
 */
export async function importItems(
  api: Api,
  items: AsyncIterable<ImportItem>,
  { keyNamesTheWork = false }: { keyNamesTheWork?: boolean } = {},
): Promise<ImportCounts> {
  const counts: ImportCounts = { created: 0, repeated: 0, otherContent: 0, refused: 0, refusals: [] };
  let batch: { where: string; body: Record<string, unknown> }[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const { body } = await api.call<BatchAnswer>('POST', '/tasks/batch', { tasks: batch.map((item) => item.body) });
    body.results.forEach((result, i) => {
      if (result.status === 201) counts.created++;
      else if (result.status === 200) counts.repeated++;
      else if (result.status === 409 && keyNamesTheWork) {
        counts.repeated++;
        counts.otherContent++;
      } else {
        counts.refused++;
        counts.refusals.push(`${batch[i]!.where}: ${result.status} ${result.message ?? ''}`.trim());
      }
    });
    batch = [];
  };
  for await (const item of items) {
    if (item.refusal !== undefined) {
      counts.refused++;
      counts.refusals.push(`${item.where}: ${item.refusal}`);
      continue;
    }
    const { exportedId, ...body } = item.body;
    if (body.key === undefined && typeof exportedId === 'number' && (await stillThere(api, exportedId, body))) {
      counts.repeated++;
      continue;
    }
    batch.push({ where: item.where, body: { ...body, key: body.key ?? keyOf(body) } });
    if (batch.length === MAX_BATCH) await flush();
  }
  await flush();
  return counts;
}

/** Whether the service has task `id` with the type, payload and time of `body` (a keyless task exported from it). */
async function stillThere(api: Api, id: number, body: Record<string, unknown>): Promise<boolean> {
  const answer = await api.call<{ type: string; payload: unknown; runAt: string; cron?: string | null }>(
    'GET',
    `/tasks/${id}`,
    undefined,
    [404],
  );
  if (answer.status !== 200) return false;
  const task = answer.body;
  const sameTime = body.cron !== undefined ? task.cron === body.cron : Date.parse(String(task.runAt)) === Date.parse(String(body.runAt));
  return task.type === body.type && isDeepStrictEqual(task.payload, body.payload ?? {}) && sameTime;
}

/** The lines of a JSON-lines file (or stdin for `-`), each a create body. */
export async function* fromJsonLines(path: string): AsyncGenerator<ImportItem> {
  const input = path === '-' ? process.stdin : createReadStream(path);
  let n = 0;
  for await (const line of createInterface({ input, crlfDelay: Infinity })) {
    n++;
    if (line.trim() === '') continue;
    let body: unknown;
    try {
      body = JSON.parse(line);
    } catch {
      throw new CliError(`${path} line ${n} is not JSON`);
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new CliError(`${path} line ${n} is not a JSON object`);
    yield { where: `line ${n}`, body: body as Record<string, unknown> };
  }
}

/** `redis://host:port/db#key`: the connection and the key, from the fragment. */
function splitSource(source: string, scheme: RegExp, what: string): { url: string; name: string } {
  const hash = source.indexOf('#');
  if (!scheme.test(source) || hash < 0 || hash === source.length - 1) {
    throw new CliError(
      `${what} must look like ${what === '--from-zset' ? 'redis://host:6379/0#queue:order:timeout' : 'mysql://user@host:3306/shop#async_task'}`,
    );
  }
  return { url: source.slice(0, hash), name: decodeURIComponent(source.slice(hash + 1)) };
}

/**
 * A ZSET score is the due time in epoch seconds (PHP's `time()`, `microtime(true)`) or epoch
 * milliseconds (`Date.now()`, `round(microtime(true) * 1000)`): 10^11 seconds is the year 5138 and
 * 10^11 milliseconds is 1973, so a score of 10^11 or more is milliseconds, and any other seconds.
 */
export const MILLISECOND_SCORES = 1e11;

/** The due epoch milliseconds of a ZSET score, and the unit it was read in. */
export function scoreTime(score: number): { ms: number; unit: 'seconds' | 'milliseconds' } {
  return Math.abs(score) >= MILLISECOND_SCORES
    ? { ms: Math.round(score), unit: 'milliseconds' }
    : { ms: Math.round(score * 1000), unit: 'seconds' };
}

/** The members of a Redis ZSET scored by due epoch second (or millisecond), as creates of `type` (`{ orderSn: member }`). */
export async function* fromZset(source: string, type: string, field = 'orderSn'): AsyncGenerator<ImportItem> {
  const { url, name } = splitSource(source, /^rediss?:\/\//, '--from-zset');
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  try {
    await redis.connect().catch((error: Error) => {
      throw new CliError(`Redis at ${url.replace(/\/\/[^@/]*@/, '//***@')} does not answer: ${error.message}`);
    });
    if ((await redis.type(name)) !== 'zset') throw new CliError(`${name} is not a sorted set on that Redis`);
    let cursor = '0';
    do {
      const [next, flat] = await redis.zscan(name, cursor, 'COUNT', 1000);
      cursor = next;
      for (let i = 0; i < flat.length; i += 2) {
        const member = flat[i]!;
        const score = Number(flat[i + 1]);
        if (!Number.isFinite(score)) continue;
        const due = scoreTime(score);
        yield {
          // Said only when the line is refused: which unit the score was read in.
          where: `member ${member} (score ${flat[i + 1]}, read as epoch ${due.unit})`,
          body: { type, payload: { [field]: member }, runAt: due.ms, key: `${type}:${member}` },
        };
      }
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/** The pending rows (status 0) of an `async_task` table (docs/migrating.md), by execute_time, as creates. */
export async function* fromAsyncTask(
  source: string,
  choice: { type: string } | { allowTypes: readonly string[] },
): AsyncGenerator<ImportItem> {
  const { url, name } = splitSource(source, /^mysql:\/\//, '--from-async-task');
  if (!/^[A-Za-z0-9_]{1,64}$/.test(name)) throw new CliError('--from-async-task: the table name is letters, digits and _');
  const conn = await mysql.createConnection({ uri: url }).catch((error: Error) => {
    throw new CliError(`the database of --from-async-task does not answer: ${error.message}`);
  });
  try {
    let after = 0;
    for (;;) {
      const [rows] = await conn.query<mysql.RowDataPacket[]>(
        `SELECT id, type, params, execute_time FROM \`${name}\` WHERE status = 0 AND id > ? ORDER BY id LIMIT 1000`,
        [after],
      );
      const sorted = [...rows].sort((a, b) => Number(a.execute_time) - Number(b.execute_time));
      for (const row of sorted) {
        let payload: unknown;
        const params: unknown = row.params;
        if (params === null || params === '') payload = {};
        else if (typeof params === 'object' && !Buffer.isBuffer(params))
          payload = params; // a JSON column: mysql2 parsed it already
        else {
          const text = Buffer.isBuffer(params) ? params.toString('utf8') : typeof params === 'string' ? params : JSON.stringify(params);
          try {
            payload = JSON.parse(text);
          } catch {
            payload = { params: text };
          }
        }
        if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) payload = { params: payload };
        const where = `${name} id ${row.id}`;
        // The dump's own type is let through only when the operator allowed it; else the line is refused, by name.
        const type = 'type' in choice ? choice.type : choice.allowTypes.includes(String(row.type)) ? String(row.type) : undefined;
        if (type === undefined) {
          yield { where, body: {}, refusal: `its type ${JSON.stringify(String(row.type))} is not among --allow-types` };
          continue;
        }
        yield { where, body: { type, payload, runAt: Number(row.execute_time) * 1000, key: `${name}:${row.id}` } };
      }
      if (rows.length < 1000) return;
      after = Number(rows[rows.length - 1]!.id);
    }
  } finally {
    await conn.end();
  }
}
