/**
 * A shop's own handlers (invariant 11: new work without a fork): plain objects from a module
 * named in HANDLERS or handed to createPunctual, checked once at start and turned into the
 * engine's handlers. A database handler gets the completion transaction as `tx.query(sql,
 * params)`, so its writes commit with the task's completion (invariant 4) without the module
 * depending on punctual's drizzle or mysql2. Anything wrong with a module stops the start with
 * one line naming the file and the problem. See docs/handlers.md.
 */
import { access } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { TSchema } from 'typebox';
import { Compile } from 'typebox/compile';
import { HANDLER_TYPE_PATTERN, type HandlerTask, type QueryFunction } from '../contract/handler-module.js';
import type { Connection } from '../db/connection.js';
import type { Task } from '../store/task-types.js';
import { HANDLER_EFFECTS, PermanentError, type TaskHandler } from './handler.js';
import { idempotencyKey } from './webhook.js';
import { workerType } from './worker-type.js';

/** A handler's time limit when it names none. */
export const DEFAULT_MODULE_TIMEOUT_MS = 30_000;
const MAX_TIMEOUT_MS = 3_600_000;
const TYPE_PATTERN = new RegExp(HANDLER_TYPE_PATTERN);

/** What is wrong with a handler module (or a list of handlers): the file and the problem. */
export class HandlerModuleError extends Error {
  override name = 'HandlerModuleError';
  constructor(
    readonly source: string,
    readonly problem: string,
  ) {
    super(`${source}: ${problem}`);
  }
}

/** The handlers of one source (a module's path, or "createPunctual handlers"), checked and adapted. */
export interface LoadedHandlers {
  source: string;
  handlers: TaskHandler[];
}

const JSON_TYPES = new Set(['object', 'array', 'string', 'number', 'integer', 'boolean', 'null']);
const SUBSCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
const SUBSCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions'];
const SUBSCHEMAS = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains'];

/** Why `schema` is not a JSON Schema, at `path`; undefined when it is one. Structural, not exhaustive. */
function schemaProblem(schema: unknown, path: string): string | undefined {
  if (typeof schema === 'boolean') return undefined;
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return `${path} is not a JSON Schema object`;
  const s = schema as Record<string, unknown>;
  if ('type' in s) {
    const types = Array.isArray(s.type) ? (s.type as unknown[]) : [s.type];
    const bad = types.find((type) => typeof type !== 'string' || !JSON_TYPES.has(type));
    if (types.length === 0 || bad !== undefined) return `${path}.type ${JSON.stringify(bad ?? s.type)} is not a JSON Schema type`;
  }
  if ('required' in s && !(Array.isArray(s.required) && s.required.every((name) => typeof name === 'string'))) {
    return `${path}.required must be an array of property names`;
  }
  for (const key of SUBSCHEMA_LISTS) {
    if (!(key in s)) continue;
    if (!Array.isArray(s[key])) return `${path}.${key} must be an array of schemas`;
    for (const [i, sub] of (s[key] as unknown[]).entries()) {
      const problem = schemaProblem(sub, `${path}.${key}[${i}]`);
      if (problem !== undefined) return problem;
    }
  }
  for (const key of SUBSCHEMA_MAPS) {
    if (!(key in s)) continue;
    const map = s[key];
    if (typeof map !== 'object' || map === null || Array.isArray(map)) return `${path}.${key} must be an object of schemas`;
    for (const [name, sub] of Object.entries(map)) {
      const problem = schemaProblem(sub, `${path}.${key}.${name}`);
      if (problem !== undefined) return problem;
    }
  }
  for (const key of SUBSCHEMAS) {
    if (!(key in s)) continue;
    const problem = schemaProblem(s[key], `${path}.${key}`);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/** Why `candidate` (entry `index` of a list) is not a handler; undefined when it is one. */
export function handlerProblem(candidate: unknown, index: number): string | undefined {
  const at = `handler ${index + 1}`;
  if (typeof candidate !== 'object' || candidate === null || Array.isArray(candidate)) return `${at} is not an object`;
  const h = candidate as Record<string, unknown>;
  const named = typeof h.type === 'string' ? `handler ${JSON.stringify(h.type)}` : at;
  if (typeof h.type !== 'string' || !TYPE_PATTERN.test(h.type)) {
    return `${at}: type ${JSON.stringify(h.type)} is not a task type name (a lower-case letter, then a-z 0-9 _ . -, 64 at most)`;
  }
  if (!(HANDLER_EFFECTS as readonly unknown[]).includes(h.effect)) {
    return `${named}: effect ${JSON.stringify(h.effect)} must be one of ${HANDLER_EFFECTS.map((e) => `'${e}'`).join(', ')}`;
  }
  const problem = schemaProblem(h.payload, 'payload');
  if (problem !== undefined) return `${named}: ${problem}`;
  if ((h.payload as { type?: unknown }).type !== 'object') return `${named}: payload must be a JSON Schema of type 'object'`;
  try {
    JSON.stringify(h.payload);
    Compile(h.payload as TSchema);
  } catch (error) {
    return `${named}: payload is not a usable JSON Schema (${(error as Error).message})`;
  }
  if (h.effect === 'worker') {
    // Pull workers run it: a run or a time limit here would be a mistake the shop should hear of.
    if (h.run !== undefined || h.runBatch !== undefined || h.timeoutMs !== undefined) {
      return `${named}: a worker type has no run, runBatch or timeoutMs (pull workers run it; the lease is its time limit)`;
    }
    return undefined;
  }
  if (typeof h.run !== 'function') return `${named}: run must be a function`;
  if (h.runBatch !== undefined && (h.effect !== 'database' || typeof h.runBatch !== 'function')) {
    return `${named}: runBatch must be a function, and only a database handler has one`;
  }
  if (
    h.timeoutMs !== undefined &&
    !(Number.isSafeInteger(h.timeoutMs) && (h.timeoutMs as number) >= 1 && (h.timeoutMs as number) <= MAX_TIMEOUT_MS)
  ) {
    return `${named}: timeoutMs must be an integer of milliseconds between 1 and ${MAX_TIMEOUT_MS}`;
  }
  return undefined;
}

/** The task as a handler sees it, on its attempt `attempt`. */
export function handlerTask(task: Task, attempt: number): HandlerTask {
  return {
    id: task.id,
    key: task.key,
    type: task.type,
    attempt,
    maxAttempts: task.maxAttempts,
    runAt: new Date(task.runAt).toISOString(),
    createdAt: new Date(task.createdAt).toISOString(),
    tags: task.tags,
  };
}

/** The connection of the completion transaction as a plain query function. */
export function queryFunction(conn: Connection): QueryFunction {
  return {
    async query<T>(sql: string, params?: unknown[]): Promise<T> {
      const [result] = await conn.query(sql, params);
      return result as T;
    },
  };
}

/** A module's error marked `permanent: true` becomes the engine's PermanentError. */
async function permanentAware<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (typeof error === 'object' && error !== null && (error as { permanent?: unknown }).permanent === true) {
      const message = (error as { message?: unknown }).message;
      throw new PermanentError(typeof message === 'string' ? message : 'failed for good', { cause: error });
    }
    throw error;
  }
}

type Definition = {
  type: string;
  effect: 'database' | 'outside' | 'worker';
  payload: TSchema;
  timeoutMs?: number;
  run: (this: void, ctx: unknown) => Promise<string | void>;
  runBatch?: (ctx: unknown) => Promise<(string | void)[]>;
};

/** The engine's handler for a checked definition. */
function adapt(definition: Definition): TaskHandler {
  const { type, payload } = definition;
  if (definition.effect === 'worker') return workerType({ type, payload });
  const timeoutMs = definition.timeoutMs ?? DEFAULT_MODULE_TIMEOUT_MS;
  if (definition.effect === 'database') {
    const runBatch = definition.runBatch;
    return {
      type,
      effect: 'database',
      payload,
      timeoutMs,
      run: ({ conn, task, payload: value, log, now }) =>
        permanentAware(() =>
          definition.run({ tx: queryFunction(conn), payload: value, task: handlerTask(task, task.attempts + 1), log, now }),
        ),
      runBatch:
        runBatch === undefined
          ? undefined
          : ({ conn, tasks, log, now }) =>
              permanentAware(() =>
                runBatch.call(definition, {
                  tx: queryFunction(conn),
                  tasks: tasks.map(({ task, payload: value }) => ({ task: handlerTask(task, task.attempts + 1), payload: value })),
                  log,
                  now,
                }),
              ),
    };
  }
  return {
    type,
    effect: 'outside',
    payload,
    timeoutMs,
    // The outside executor hands over the task with this attempt already counted.
    run: ({ task, attempt, payload: value, signal, log, now }) =>
      permanentAware(() =>
        definition.run({ payload: value, task: handlerTask(task, attempt), signal, idempotencyKey: idempotencyKey(task), log, now }),
      ),
  };
}

/** Checks a list of handler definitions from `source` and adapts them; throws HandlerModuleError. */
export function handlersFrom(source: string, list: unknown): LoadedHandlers {
  if (!Array.isArray(list)) return fail(source, `must export default an array of handlers, got ${describe(list)}`);
  const seen = new Set<string>();
  const handlers = list.map((candidate: unknown, index) => {
    const problem = handlerProblem(candidate, index);
    if (problem !== undefined) fail(source, problem);
    const definition = candidate as Definition;
    if (seen.has(definition.type)) fail(source, `type ${JSON.stringify(definition.type)} is declared twice`);
    seen.add(definition.type);
    return adapt(definition);
  });
  return { source, handlers };
}

function fail(source: string, problem: string): never {
  throw new HandlerModuleError(source, problem);
}

function describe(value: unknown): string {
  if (value === undefined) return 'no default export';
  if (value === null) return 'null';
  return Array.isArray(value) ? 'an array' : typeof value;
}

/** The first line of an import's error, without the file URL noise. */
function importProblem(error: unknown): string {
  const e = error as { name?: string; code?: string; message?: string };
  const first = String(e?.message ?? error).split('\n')[0]!;
  if (e?.code === 'ERR_MODULE_NOT_FOUND') return `does not load: ${first}`;
  return `does not load: ${e?.name ?? 'Error'}: ${first}`;
}

/** Imports one module named in HANDLERS and checks its default export. */
export async function loadHandlerModule(path: string, cwd = process.cwd()): Promise<LoadedHandlers> {
  const file = isAbsolute(path) ? path : resolve(cwd, path);
  try {
    await access(file);
  } catch {
    fail(path, 'no such file');
  }
  let loaded: { default?: unknown };
  try {
    loaded = (await import(pathToFileURL(file).href)) as { default?: unknown };
  } catch (error) {
    fail(path, importProblem(error));
  }
  return handlersFrom(path, loaded.default);
}

/** Every module of HANDLERS, in order. */
export async function loadHandlerModules(paths: readonly string[]): Promise<LoadedHandlers[]> {
  const loaded: LoadedHandlers[] = [];
  for (const path of paths) loaded.push(await loadHandlerModule(path));
  return loaded;
}
