/**
 * What `npm run test:php`, `test:python` and `test:go` share: a client's own test command run
 * against a real punctual and the local MariaDB (service.ts), the way a shop in that language
 * would meet them.
 *
 * What it decides:
 * - The language's tools are Debian's packages: missing ones are installed with apt when this runs
 *   as root with apt-get at hand; otherwise it stops with the command to run.
 * - The server is built (npm run build) unless dist/ is newer than every file in src/.
 * - `prepare` runs before any service starts (an autoloader, a type check): a failure there costs
 *   no database.
 * - The test command gets the service's variables (and this script's arguments, to pick tests);
 *   its exit code is the run's. It may run for `timeoutMs` at most: a client that hangs fails.
 * - Whatever happens, the servers are stopped and the database is dropped afterwards; on a
 *   failure the last lines of the service's log are printed.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { killLeftoverServers } from '../helpers/server.js';
import { type ClientService, type ClientServiceOptions, startClientService, startTestClockService } from './service.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A Debian package and how to tell it is there. */
export type DebianPackage = [pkg: string, present: () => boolean];

/** More services a client's tests need beside punctual: their variables, and how to stop them. */
export interface ExtraServices {
  env?: Record<string, string>;
  stop?: () => Promise<void>;
}

export interface ClientTestRun extends ClientServiceOptions {
  /** The script's name in messages and the database's label: php, python, go. */
  name: string;
  packages: DebianPackage[];
  /** Before any service starts: throws to fail the run. */
  prepare?: () => void;
  /** After the service started: more services the client's tests need, and their variables. */
  setUp?: (service: ClientService) => Promise<ExtraServices>;
  command: [string, ...string[]];
  cwd: string;
  env?: Record<string, string>;
  /** The whole test command may take this long (default 10 minutes). */
  timeoutMs?: number;
}

/** True when `command args` runs and exits 0. */
export function has(command: string, args: string[]): boolean {
  return spawnSync(command, args, { stdio: 'ignore' }).status === 0;
}

function ensurePackages(name: string, packages: DebianPackage[]): void {
  const missing = packages.filter(([, present]) => !present()).map(([pkg]) => pkg);
  if (missing.length === 0) return;
  const command = `apt-get update && apt-get install -y ${missing.join(' ')}`;
  if (process.getuid?.() !== 0 || !has('apt-get', ['--version'])) {
    console.error(`test:${name} needs Debian's ${missing.join(', ')}: run as root: ${command}`);
    process.exit(1);
  }
  console.log(`test:${name}: installing ${missing.join(', ')} from Debian's packages`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', ...missing], { stdio: 'inherit', env });
  const still = packages.filter(([, present]) => !present()).map(([pkg]) => pkg);
  if (still.length > 0) throw new Error(`still missing after apt-get install: ${still.join(', ')}`);
}

/** dist/ is older than some file in src/ (npm test builds it too: after it, this build is skipped). */
function buildIsStale(): boolean {
  const main = join(ROOT, 'dist/app/main.js');
  if (!existsSync(main)) return true;
  const built = statSync(main).mtimeMs;
  const sources = readdirSync(join(ROOT, 'src'), { recursive: true, withFileTypes: true });
  return sources.some((entry) => entry.isFile() && statSync(join(entry.parentPath, entry.name)).mtimeMs > built);
}

async function main(run: ClientTestRun): Promise<number> {
  ensurePackages(run.name, run.packages);
  run.prepare?.();
  if (buildIsStale()) execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });

  let service: ClientService | undefined;
  let extra: ExtraServices | undefined;
  let clock: ExtraServices | undefined;
  const cleanUp = async () => {
    await extra?.stop?.();
    await clock?.stop?.();
    await service?.stop();
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      void cleanUp().finally(() => process.exit(1));
    });
  }
  try {
    service = await startClientService(run.name, run);
    extra = await run.setUp?.(service);
    clock = await startTestClockService(run.name);
    const [command, ...args] = run.command;
    const child = spawn(command, [...args, ...process.argv.slice(2)], {
      cwd: run.cwd,
      stdio: 'inherit',
      env: { ...process.env, ...run.env, ...service.clientEnv, ...extra?.env, ...clock.env },
    });
    const timeoutMs = run.timeoutMs ?? 600_000;
    const timer = setTimeout(() => {
      console.error(`test:${run.name}: ${command} ran past ${timeoutMs} ms; stopping it`);
      child.kill('SIGKILL');
    }, timeoutMs);
    const [code] = (await once(child, 'exit')) as [number | null];
    clearTimeout(timer);
    if (code !== 0) {
      console.error(`test:${run.name}: the last lines of the service log:`);
      for (const line of service.server.logs.slice(-15)) console.error(JSON.stringify(line));
      for (const line of service.server.stderr.slice(-15)) console.error(line);
    }
    return code ?? 1;
  } finally {
    await cleanUp();
    killLeftoverServers();
  }
}

/** Runs the client's tests as the header says and exits with their code. */
export function runClientTests(run: ClientTestRun): void {
  main(run).then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(`test:${run.name} failed:`, error);
      process.exit(1);
    },
  );
}
