/**
 * ops/punctual.service as systemd would run it, on a machine without systemd running: its
 * ExecStart (the node and the installed package standing for this checkout's), its User and Group,
 * and the environment systemd gives a service (its Environment= lines and its EnvironmentFile=, read
 * by systemd's rules), and nothing else but a free port. docs/production.md's steps are run as
 * written where they touch no more than a folder of the test's: the user is made by `useradd
 * --prefix` (in a copy of /etc/passwd and /etc/group), the secrets' folders and the token by its
 * own `install` lines under a temporary /etc. (systemd-analyze verifies the unit's syntax:
 * test/process/service-package.test.ts.)
 *
 * What a shop relies on: the unit starts with only DATABASE_URL and an API token (no webhook
 * secret, no database password), as the user the steps made, reading its token from a file no
 * other user can read; a secret it names but cannot read stops it with one line.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const UNIT = readFileSync(join(ROOT, 'ops', 'punctual.service'), 'utf8');
const PRODUCTION = readFileSync(join(ROOT, 'docs', 'production.md'), 'utf8');
/** Where the unit expects the package, and the node it runs. */
const INSTALLED = '/opt/punctual/lib/node_modules/punctual';
/** What systemd puts in a system service's PATH. */
const SYSTEMD_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin';

/** The [Service] section's settings, each key's values in order. */
function service(unit: string): Map<string, string[]> {
  const settings = new Map<string, string[]>();
  let section = '';
  for (const raw of unit.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header !== null) {
      section = header[1]!;
      continue;
    }
    if (section !== 'Service') continue;
    const at = line.indexOf('=');
    const key = line.slice(0, at).trim();
    settings.set(key, [...(settings.get(key) ?? []), line.slice(at + 1).trim()]);
  }
  return settings;
}

/** An environment file by systemd's rules: KEY=VALUE lines, # and ; comments, quotes taken off. */
function environmentFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const at = line.indexOf('=');
    expect(at, `an environment file line is KEY=VALUE: ${line}`).toBeGreaterThan(0);
    env[line.slice(0, at).trim()] = line
      .slice(at + 1)
      .trim()
      .replace(/^(["'])(.*)\1$/, '$2');
  }
  return env;
}

/** The fenced block of docs/production.md in `lang` that holds `text`. */
function docBlock(lang: string, text: string): string {
  const found = [...PRODUCTION.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].filter(([, l, body]) => l === lang && body!.includes(text));
  expect(found, `docs/production.md has one ${lang} block with ${text}`).toHaveLength(1);
  return found[0]![2]!;
}

const unit = service(UNIT);
/** The environment the unit gives the service, its files read from under `etc` (standing for /etc). */
function unitEnvironment(etc: string): Record<string, string> {
  const env: Record<string, string> = { PATH: SYSTEMD_PATH };
  for (const assignments of unit.get('Environment') ?? [])
    for (const [, name, value] of assignments.matchAll(/"?(\w+)=([^"\s]*)"?/g)) env[name!] = value!;
  for (const file of unit.get('EnvironmentFile') ?? []) {
    const optional = file.startsWith('-');
    const path = file.replace(/^-/, '').replace(/^\/etc\//, `${etc}/`);
    if (optional && !existsSync(path)) continue;
    Object.assign(env, environmentFile(readFileSync(path, 'utf8')));
  }
  return env;
}

interface Started {
  child: ChildProcess;
  /** The address once ready, or the exit code when it stopped first. */
  outcome: Promise<{ address: string } | { code: number | null }>;
  output: string[];
}

/** Runs the unit's ExecStart with `env`, as `user` (uid, gid) when given. */
function execStart(env: Record<string, string>, user?: { uid: number; gid: number }): Started {
  const [command, ...args] = unit.get('ExecStart')![0]!.split(/\s+/);
  expect(command).toBe('/usr/bin/node');
  const argv = args.map((arg) => arg.replace(INSTALLED, ROOT.replace(/\/$/, '')));
  expect(argv).toEqual([join(ROOT, 'bin', 'punctual.mjs'), 'start']);
  const child = spawn(process.execPath, argv, { env, stdio: ['ignore', 'pipe', 'pipe'], ...(user ?? {}) });
  const output: string[] = [];
  const outcome = new Promise<{ address: string } | { code: number | null }>((resolve) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      output.push(line);
      try {
        const entry = JSON.parse(line) as { msg?: string; address?: string };
        if (entry.msg === 'punctual is ready') resolve({ address: String(entry.address) });
      } catch {
        // not a log line
      }
    });
    createInterface({ input: child.stderr }).on('line', (line) => output.push(line));
    void once(child, 'exit').then(([code]) => resolve({ code: code as number | null }));
  });
  return { child, outcome, output };
}

async function stop(started: Started): Promise<number | null> {
  if (started.child.exitCode !== null) return started.child.exitCode;
  started.child.kill('SIGTERM');
  const [code] = await once(started.child, 'exit');
  return code as number | null;
}

/** Runs a shell script of the doc (bash, no rc files), failing the test on a non-zero exit. */
function bash(script: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'bash',
      ['--norc', '--noprofile', '-c', `set -euo pipefail\n${script}`],
      { env: { PATH: process.env.PATH ?? '' } },
      (error, stdout, stderr) => (error === null ? resolve(stdout) : reject(new Error(`${script}\nfailed: ${stderr}`))),
    );
  });
}

let db: TestDatabase;
let dir: string;

beforeAll(async () => {
  db = await createTestDatabase('systemd_unit');
  dir = mkdtempSync(join(tmpdir(), 'punctual-unit-'));
  chmodSync(dir, 0o755); // the service's user walks through it to its files, as through /
});

afterAll(async () => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  await db?.drop();
});

/** docs/production.md's environment file, under `etc`, pointed at the test's database. */
function writeEnvironmentFile(etc: string): Record<string, string> {
  const text = docBlock('ini', 'DATABASE_URL=')
    .replaceAll('/etc/punctual', `${etc}/punctual`)
    .replace(/^DATABASE_URL=.*$/m, `DATABASE_URL=${db.url}`);
  mkdirSync(join(etc, 'punctual'), { recursive: true });
  writeFileSync(join(etc, 'punctual', 'env'), text);
  return environmentFile(text);
}

describe('ops/punctual.service', () => {
  it('names no secret itself, and reads every setting from its environment file', () => {
    expect(unit.get('EnvironmentFile')).toEqual(['/etc/punctual/env']);
    expect(UNIT).not.toMatch(/^Environment=.*_FILE=/m);
    expect(unit.get('User')).toEqual(['punctual']);
    expect(unit.get('Group')).toEqual(['punctual']);
  });

  it('starts with only DATABASE_URL and an API token, and a named secret it cannot read stops it in one line', async () => {
    const etc = join(dir, 'plain', 'etc');
    const settings = writeEnvironmentFile(etc);
    // The minimal file: the database and the token, nothing of webhooks or a database password.
    expect(Object.keys(settings).sort()).toEqual(['API_TOKEN_FILE', 'DATABASE_URL']);
    const token = `unit-token-${Date.now()}-0123456789`;
    mkdirSync(join(etc, 'punctual', 'secrets'), { recursive: true });
    writeFileSync(settings.API_TOKEN_FILE!, `${token}\n`);
    const env = { ...unitEnvironment(etc), PORT: '0' };
    const started = execStart(env);
    let stopped: number | null;
    try {
      const outcome = await started.outcome;
      expect(outcome, started.output.join('\n')).toHaveProperty('address');
      const address = (outcome as { address: string }).address;
      expect((await fetch(`${address}/readyz`)).status).toBe(200);
      expect((await fetch(`${address}/tasks/pending`)).status).toBe(401);
      expect((await fetch(`${address}/tasks/pending`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    } finally {
      stopped = await stop(started);
    }
    expect(stopped).toBe(0);
    // The token's file gone: no start, one line naming the setting and the file.
    rmSync(settings.API_TOKEN_FILE!);
    const refused = execStart(env);
    expect(await refused.outcome).toEqual({ code: 1 });
    expect(refused.output.join('\n')).toContain(`API_TOKEN_FILE: cannot read "${settings.API_TOKEN_FILE}" (no such file)`);
  }, 60_000);

  it.runIf(process.getuid?.() === 0)(
    "docs/production.md's steps make its user and its token's file, and it runs as that user, which alone reads the token",
    async () => {
      const root = join(dir, 'steps');
      const etc = join(root, 'etc');
      // useradd works on copies of the machine's account files, under a prefix of the test's.
      const prefix = join(root, 'accounts');
      mkdirSync(join(prefix, 'etc'), { recursive: true });
      for (const file of ['passwd', 'group', 'shadow', 'gshadow', 'login.defs'])
        if (existsSync(`/etc/${file}`)) copyFileSync(`/etc/${file}`, join(prefix, 'etc', file));
      const steps = docBlock('sh', 'useradd').split('\n');
      const useradd = steps.find((line) => line.startsWith('useradd '))!;
      await bash(useradd.replace(/^useradd /, `useradd --prefix ${prefix} `));
      const account = readFileSync(join(prefix, 'etc', 'passwd'), 'utf8')
        .split('\n')
        .map((line) => line.split(':'))
        .find(([name]) => name === unit.get('User')![0]);
      expect(account, 'the user the unit runs as, made by the steps').toBeDefined();
      const uid = Number(account![2]);
      const gid = Number(account![3]);
      const group = readFileSync(join(prefix, 'etc', 'group'), 'utf8')
        .split('\n')
        .find((line) => line.startsWith(`${unit.get('Group')![0]}:`));
      expect(Number(group?.split(':')[2]), 'its group, of the same name').toBe(gid);
      expect(account![6]).toMatch(/nologin$/);

      // The folders, the token and the unit's copy, as written (the package's install is service-package.test.ts's).
      const rest = steps
        .filter((line) => !line.startsWith('useradd ') && !line.startsWith('npm install ') && !line.startsWith('#') && line.trim() !== '')
        .join('\n')
        .replaceAll('/etc/', `${etc}/`)
        .replaceAll(' ops/punctual.service', ` ${join(ROOT, 'ops', 'punctual.service')}`)
        .replaceAll('-g punctual', `-g ${gid}`);
      mkdirSync(join(etc, 'systemd', 'system'), { recursive: true });
      await bash(rest);
      const settings = writeEnvironmentFile(etc);
      const tokenFile = settings.API_TOKEN_FILE!;
      const token = readFileSync(tokenFile, 'utf8').trim();
      expect(token).toMatch(/^[0-9a-f]{64}$/);
      expect([statSync(tokenFile).mode & 0o777, statSync(tokenFile).uid, statSync(tokenFile).gid]).toEqual([0o640, 0, gid]);
      expect(statSync(join(etc, 'punctual', 'secrets')).mode & 0o777).toBe(0o750);
      expect(readFileSync(join(etc, 'systemd', 'system', 'punctual.service'), 'utf8')).toBe(UNIT);
      // Another user cannot read it.
      const other = spawn('cat', [tokenFile], { uid: 65534, gid: 65534, stdio: 'ignore' });
      expect((await once(other, 'exit'))[0]).not.toBe(0);

      const started = execStart({ ...unitEnvironment(etc), PORT: '0' }, { uid, gid });
      let stopped: number | null;
      try {
        const outcome = await started.outcome;
        expect(outcome, started.output.join('\n')).toHaveProperty('address');
        const address = (outcome as { address: string }).address;
        expect((await fetch(`${address}/tasks/pending`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
        expect(readFileSync(`/proc/${started.child.pid}/status`, 'utf8')).toMatch(new RegExp(`^Uid:\\s+${uid}\\s`, 'm'));
      } finally {
        stopped = await stop(started);
      }
      expect(stopped).toBe(0);
    },
    60_000,
  );
});
