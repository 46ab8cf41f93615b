/**
 * The real server (node dist/app/main.js, built by the global setup) as a child process, the way a
 * shop runs it. Its JSON log lines are collected for the test to read.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('../../dist/app/main.js', import.meta.url));

export interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

export interface ServerProcess {
  child: ChildProcess;
  baseUrl: string;
  logs: LogLine[];
  stderr: string[];
  /** fetch against the server with a JSON body, answering status and parsed body. */
  request<T = any>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: T }>;
  /** Sends `signal` and waits for the exit code (null when killed by a signal). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  exited: Promise<number | null>;
}

export interface StartOptions {
  env: Record<string, string>;
  /** How long to wait for "punctual is ready". */
  timeoutMs?: number;
  /** Another built entry point (default: this checkout's dist/app/main.js). */
  main?: string;
  /** Told of each log line as it comes, before the server is ready too. */
  onLog?: (line: LogLine) => void;
  /** Arguments after the entry point (`start --test-clock` for bin/punctual.mjs). */
  args?: string[];
}

const running = new Set<ChildProcess>();
process.on('exit', () => killLeftoverServers());

/** Kills every server a test started and did not stop (a failed test must not leave one running). */
export function killLeftoverServers(): number {
  const left = running.size;
  for (const child of running) child.kill('SIGKILL');
  running.clear();
  return left;
}

/** A server process just spawned, not yet ready: its log lines as they come. */
export interface LaunchedServer {
  child: ChildProcess;
  logs: LogLine[];
  stderr: string[];
  exited: Promise<number | null>;
  /** Resolves with the address once the server logs "punctual is ready". */
  ready: Promise<string>;
}

/** Spawns the server without waiting for it: for a test that kills it while it boots. */
export function launchServer({ env, main = MAIN, onLog, args = [] }: Omit<StartOptions, 'timeoutMs'>): LaunchedServer {
  const child = spawn(process.execPath, [main, ...args], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  const exited = once(child, 'exit').then(([code]) => {
    running.delete(child);
    return code as number | null;
  });
  const logs: LogLine[] = [];
  const stderr: string[] = [];
  let onReady: ((address: string) => void) | undefined;
  const ready = new Promise<string>((resolve) => {
    onReady = resolve;
  });
  createInterface({ input: child.stdout }).on('line', (line) => {
    try {
      const entry = JSON.parse(line) as LogLine;
      logs.push(entry);
      onLog?.(entry);
      if (entry.msg === 'punctual is ready') onReady?.(String(entry.address));
    } catch {
      stderr.push(line);
    }
  });
  createInterface({ input: child.stderr }).on('line', (line) => stderr.push(line));
  return { child, logs, stderr, exited, ready };
}

export async function startServer({ env, timeoutMs = 20_000, main = MAIN, onLog, args }: StartOptions): Promise<ServerProcess> {
  const { child, logs, stderr, exited, ready } = launchServer({ env, main, onLog, args });
  const timeout = new Promise<never>((_, reject) =>
    setTimeout(() => reject(new Error(`server not ready in ${timeoutMs} ms: ${stderr.join('\n')}`)), timeoutMs).unref(),
  );
  const failed = exited.then((code) => {
    throw new Error(`server exited with ${code} before it was ready: ${stderr.join('\n')} ${JSON.stringify(logs.slice(-5))}`);
  });
  const baseUrl = await Promise.race([ready, timeout, failed]);

  return {
    child,
    baseUrl,
    logs,
    stderr,
    exited,
    async request(method, path, body, headers = {}) {
      const response = await fetch(`${baseUrl}${path}`, {
        method,
        headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill(signal);
      return exited;
    },
  };
}

/** Polls `check` until it returns a value that is not undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(check: () => Promise<T | undefined | false>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * The server's last error log lines, for a failure's message: a 500 says only "see the service
 * log". The line can reach the test after the answer does (stdout and the socket are two pipes),
 * so it is waited for, up to a second.
 */
export async function errorsLogged(server: ServerProcess, count = 3): Promise<string> {
  const errors = () => server.logs.filter((line) => line.level >= 50).slice(-count);
  await waitFor(async () => errors().length > 0, 1000, 'an error log line').catch(() => undefined);
  return errors().length === 0 ? '' : `; its last errors logged: ${JSON.stringify(errors())}`;
}

/**
 * POSTs `body` to /tasks as a shop's client would: a 503 PUNCTUAL_WRITE_CONFLICT (the create lost
 * to a concurrent write and was rolled back, on Galera a conflict between two nodes) is sent
 * again after its Retry-After, up to 3 times in all.
 */
export async function createTask(server: ServerProcess, body: unknown): Promise<{ status: number; body: any }> {
  for (let tries = 1; ; tries++) {
    const answer = await server.request('POST', '/tasks', body);
    if (answer.status !== 503 || answer.body?.code !== 'PUNCTUAL_WRITE_CONFLICT' || tries === 3) return answer;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/** POSTs every body to /tasks (createTask), `parallel` at a time; answers the created tasks' ids in order. */
export async function createTasks(server: ServerProcess, bodies: unknown[], parallel = 16): Promise<number[]> {
  const ids: number[] = new Array(bodies.length);
  let next = 0;
  const worker = async () => {
    while (next < bodies.length) {
      const index = next++;
      const { status, body } = await createTask(server, bodies[index]);
      if (status !== 201) throw new Error(`POST /tasks answered ${status}: ${JSON.stringify(body)}${await errorsLogged(server)}`);
      ids[index] = body.id;
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return ids;
}
