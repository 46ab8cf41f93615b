/**
 * The curl examples of the README and docs/ run as written, in document order, against real
 * servers: a new user copies them, so each must answer what the doc says (a 2xx, or the status its
 * line names: `# … answers 409`).
 *
 * An example runs on the default configuration (only DATABASE_URL set) unless an HTML comment
 * right above its block names what to set first:
 *
 *     <!-- example-env: WEBHOOK_SECRET=$WEBHOOK_SECRET WEBHOOK_ALLOWED_HOSTS=shop.internal -->
 *
 * A rendered page hides the comment, so the prose above the block must name each setting too
 * (checked here). A `$NAME` value is a secret the test makes up and also sets in the shell, as a
 * reader would set `$READ_TOKEN`. Each distinct environment gets a server and a database of its own.
 *
 * In each command the documented address (`localhost:3000`, `127.0.0.1:3000`) becomes the test
 * server's, and `https://shop.internal` a receiver this file runs (in the env too). Shell variables
 * an example uses come from the env note, or from earlier answers: `$NEXT_CURSOR` (the latest
 * `nextCursor`), `$TASK_ID` (the latest task's `id`); any other is a missing env note. A block that
 * starts with `npm start` stands for the test's server; its `npm run demo` runs against it, as the
 * tour does, and creates the demo shop's tables that close_order works on.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { type ServerProcess, startServer } from '../helpers/server.js';

vi.setConfig({ testTimeout: 60_000 });

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DOCS = [
  'README.md',
  ...readdirSync(new URL('../../docs/', import.meta.url))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`),
];
/** The address the docs call punctual at, and the receivers they name. */
const DOC_SERVICE = /\b(?:localhost|127\.0\.0\.1):3000\b/g;
const DOC_RECEIVER = /https?:\/\/shop\.internal\b/g;
/** Variables the test sets from earlier answers. */
const FROM_ANSWERS = ['NEXT_CURSOR', 'TASK_ID'];

interface Command {
  where: string;
  text: string;
  /** The status the command's comment names (`# answers 409`), else any 2xx. */
  status?: number;
}

interface Block {
  where: string;
  env: Record<string, string>;
  /** The prose between the block and the one before it (or the heading). */
  prose: string;
  commands: Command[];
  /** A block that starts the service: its other lines run against the test's server. */
  starts: boolean;
}

/** Splits a shell block into commands: newlines end one unless quoted or escaped; comments kept apart. */
function commandsOf(block: string, file: string, firstLine: number): Command[] {
  const commands: Command[] = [];
  let text = '';
  let comment = '';
  let line = firstLine;
  let startLine = firstLine;
  let quote: string | undefined;
  const flush = () => {
    if (text.trim() !== '') {
      const status = /\banswers (\d{3})\b/.exec(comment)?.[1];
      commands.push({ where: `${file}:${startLine}`, text: text.trim(), ...(status === undefined ? {} : { status: Number(status) }) });
    }
    text = '';
    comment = '';
  };
  for (let i = 0; i < block.length; i++) {
    const c = block[i]!;
    if (c === '\n') line++;
    if (quote !== undefined) {
      text += c;
      if (c === quote) quote = undefined;
      continue;
    }
    if (text.trim() === '') startLine = line;
    if (c === "'" || c === '"') {
      quote = c;
      text += c;
    } else if (c === '\\' && block[i + 1] === '\n') {
      text += ' ';
      i++;
      line++;
    } else if (c === '#' && (text === '' || /\s$/.test(text))) {
      const end = block.indexOf('\n', i);
      comment += block.slice(i, end === -1 ? undefined : end);
      i = (end === -1 ? block.length : end) - 1;
    } else if (c === '\n') {
      flush();
    } else {
      text += c;
    }
  }
  flush();
  return commands;
}

function blocksOf(file: string): Block[] {
  const lines = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8').split('\n');
  const blocks: Block[] = [];
  let prose: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^#{1,6} /.test(line)) prose = [];
    const fence = /^```(\w*)/.exec(line);
    if (fence === null) {
      prose.push(line);
      continue;
    }
    const start = i + 1;
    while (i + 1 < lines.length && !lines[i + 1]!.startsWith('```')) i++;
    const body = lines.slice(start, i + 1).join('\n');
    i++;
    const note = prose.join('\n').match(/<!--\s*example-env:([^>]*?)-->\s*$/)?.[1];
    const text = prose.join('\n');
    prose = [];
    if (!['sh', 'bash', 'shell'].includes(fence[1]!)) continue;
    const commands = commandsOf(body, file, start + 1);
    const starts = commands[0]?.text.startsWith('npm start') ?? false;
    if (!starts && !commands.some((command) => command.text.startsWith('curl'))) continue;
    const env = Object.fromEntries(
      (note ?? '')
        .trim()
        .split(/\s+/)
        .filter((pair) => pair !== '')
        .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
    );
    blocks.push({ where: `${file}:${start}`, env, prose: text, commands: starts ? commands.slice(1) : commands, starts });
  }
  return blocks;
}

const blocks = DOCS.flatMap(blocksOf);

/** Secrets for the `$NAME`s the docs use, made up once per run. */
const secrets = new Map<string, string>();
const secret = (name: string) => {
  if (!secrets.has(name)) secrets.set(name, `doc-${name.toLowerCase().replace(/_/g, '-')}-${randomBytes(8).toString('hex')}`);
  return secrets.get(name)!;
};

let receiver: Server;
let receiverHost: string;
const servers = new Map<string, { server: ServerProcess; db: TestDatabase }>();
const fromAnswers: Record<string, string> = {};

beforeAll(async () => {
  receiver = createServer((request, response) => {
    request.resume();
    request.on('end', () => response.end('ok'));
  });
  receiver.listen(0, '127.0.0.1');
  await new Promise((resolve) => receiver.once('listening', resolve));
  receiverHost = `127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const { server, db } of servers.values()) {
    expect(await server.stop()).toBe(0);
    await db.drop();
  }
  await new Promise((resolve) => receiver?.close(resolve));
});

/** The env a block's note names, with secrets filled in and the docs' receiver host made the test's. */
function serverEnv(block: Block): Record<string, string> {
  return Object.fromEntries(
    Object.entries(block.env).map(([name, value]) => [
      name,
      value.replace(/^\$(\w+)$/, (_, variable: string) => secret(variable)).replace(/\bshop\.internal\b/g, receiverHost),
    ]),
  );
}

async function serverFor(block: Block): Promise<ServerProcess> {
  const env = serverEnv(block);
  const id = JSON.stringify(Object.entries(env).sort());
  let entry = servers.get(id);
  if (entry === undefined) {
    const db = await createTestDatabase('doc_examples');
    entry = { db, server: await startServer({ env: { DATABASE_URL: db.url, ...env } }) };
    servers.set(id, entry);
  }
  return entry.server;
}

function bash(command: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['-c', command], { cwd: ROOT, env, timeout: 45_000 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr }),
    );
  });
}

/** The shell variables a block may use: its env's secrets, then what earlier answers set. */
function shellVariables(block: Block): Record<string, string> {
  const variables: Record<string, string> = {};
  for (const value of Object.values(block.env)) {
    const name = /^\$(\w+)$/.exec(value)?.[1];
    if (name !== undefined) variables[name] = secret(name);
  }
  return { ...variables, ...fromAnswers };
}

describe('the docs examples', () => {
  it('are found, and every env note is said in words above its block too', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(8);
    expect(blocks.flatMap((block) => block.commands).length).toBeGreaterThanOrEqual(25);
    expect(blocks.some((block) => block.starts)).toBe(true);
    for (const block of blocks) {
      for (const name of Object.keys(block.env)) {
        expect(block.prose.replace(/<!--[\s\S]*?-->/g, ''), `${block.where}: the prose above names ${name}`).toContain(`\`${name}\``);
      }
    }
  });

  for (const block of blocks) {
    for (const command of block.commands) {
      it(`${command.where}: ${command.text.slice(0, 100)}`, async () => {
        const server = await serverFor(block);
        const variables = shellVariables(block);
        for (const [, name] of command.text.matchAll(/\$\{?(\w+)/g)) {
          expect(
            variables[name!],
            `${command.where} uses $${name!}: neither an env note above the block nor an earlier answer (${FROM_ANSWERS.join(', ')}) sets it`,
          ).toBeDefined();
        }
        const address = new URL(server.baseUrl).host;
        const text = command.text.replace(DOC_SERVICE, address).replace(DOC_RECEIVER, `http://${receiverHost}`);

        if (block.starts) {
          // The tour's `npm run demo`, small: it makes the demo shop's tables in the server's database.
          expect(text, `${command.where}: only npm run demo runs beside npm start`).toMatch(/^npm run demo\b/);
          const entry = [...servers.values()].find((candidate) => candidate.server === server)!;
          const run = await bash(text, {
            ...process.env,
            PUNCTUAL_URL: server.baseUrl,
            DATABASE_URL: entry.db.url,
            DEMO_TASKS: '30',
            DEMO_SECONDS: '1',
          });
          expect(run.code, `${command.where}: ${run.stdout}${run.stderr}`).toBe(0);
          return;
        }

        expect(text, `${command.where}: a curl command`).toMatch(/^curl /);
        const others = [...text.matchAll(/https?:\/\/([^/\s'"]+)/g)].map(([, host]) => host!).filter((host) => host !== receiverHost);
        expect(others, `${command.where} calls a host the test does not stand in for`).toEqual([]);
        // curl as the doc writes it, with the status on a line of its own after the body.
        const run = await bash(`curl() { command curl -w '\\n%{http_code}' "$@"; }\n${text}`, {
          PATH: process.env.PATH ?? '',
          ...variables,
        });
        expect(run.code, `${command.where}: curl failed: ${run.stderr}`).toBe(0);
        const cut = run.stdout.lastIndexOf('\n');
        const body = run.stdout.slice(0, cut);
        const status = Number(run.stdout.slice(cut + 1));
        if (command.status === undefined) {
          expect(status, `${command.where} answered ${status}: ${body}`).toBeGreaterThanOrEqual(200);
          expect(status, `${command.where} answered ${status}: ${body}`).toBeLessThan(300);
        } else {
          expect(status, `${command.where} answered ${status}, the doc says ${command.status}: ${body}`).toBe(command.status);
        }
        let answer: unknown;
        try {
          answer = JSON.parse(body);
        } catch {
          return;
        }
        if (typeof answer !== 'object' || answer === null) return;
        const { nextCursor, id } = answer as { nextCursor?: unknown; id?: unknown };
        if (typeof nextCursor === 'string') fromAnswers.NEXT_CURSOR = nextCursor;
        if (typeof id === 'number') fromAnswers.TASK_ID = String(id);
      });
    }
  }
});
