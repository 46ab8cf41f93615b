/**
 * A shop's handler package, made the way a shop would: a folder of its own outside the
 * repository, with its own package.json, that installs the packed @punctual/client offline (its
 * one dependency, typebox, linked from this checkout) and imports only `defineHandler` from it.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLIENT = join(ROOT, 'clients', 'ts');

/** Runs a command without blocking this process (a service under test may be answering in it); its stdout, or an error with all it said. */
export async function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)(command, args, { cwd, env: { ...process.env, ...env }, maxBuffer: 16 * 1024 * 1024 });
    return stdout;
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`${command} ${args.join(' ')} failed:\n${stdout ?? ''}${stderr ?? ''}`, { cause: error });
  }
}

export interface HandlerPackage {
  dir: string;
  /** Writes `source` as `name` in the package; answers its absolute path. */
  write(name: string, source: string): string;
  remove(): void;
}

/** A package in a temporary folder with @punctual/client installed from its packed tarball. */
export async function makeHandlerPackage(prefix = 'shop-handlers-'): Promise<HandlerPackage> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const [packed] = JSON.parse(await run('npm', ['pack', '--json', '--pack-destination', dir], CLIENT)) as { filename: string }[];
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({
      name: 'shop-handlers',
      version: '1.0.0',
      private: true,
      type: 'module',
      // typebox, the client's one dependency, from this checkout: no registry is asked.
      dependencies: { '@punctual/client': `file:./${packed!.filename}`, typebox: `file:${join(ROOT, 'node_modules', 'typebox')}` },
    }),
  );
  await run('npm', ['install', '--offline', '--no-audit', '--no-fund'], dir);
  return {
    dir,
    write(name, source) {
      const path = join(dir, name);
      writeFileSync(path, source);
      return path;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
