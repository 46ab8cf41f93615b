/**
 * The real server started to fail: its exit code and what it printed. A start-up error must be
 * one line on stderr naming the setting, with nothing else (no stack, no JSON log of it).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

const MAIN = fileURLToPath(new URL('../../dist/app/main.js', import.meta.url));

export interface StartFailure {
  code: number | null;
  /** The one line on stderr. */
  line: string;
  stderr: string;
  stdout: string;
}

/** Starts the server with `env`, waits for its exit, and checks it failed with one line. */
export async function startFailure(env: Record<string, string>, timeoutMs = 60_000): Promise<StartFailure> {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  const lines = stderr.split('\n').filter((line) => line !== '');
  expect(code, `exit code; stderr: ${stderr}`).toBe(1);
  expect(lines, `stderr is one line: ${stderr}`).toHaveLength(1);
  expect(stderr).not.toMatch(/\n\s+at /);
  expect(stdout, 'no log line carries a stack').not.toContain('"stack"');
  return { code, line: lines[0]!, stderr, stdout };
}
