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
 * `nextCursor`), `$TASK_ID` (the latest task's `id`); any other is a missing env note. A block whose
 * line is `npm start`, after settings or none (`WEBHOOK_ALLOWED_HOSTS=… npm start`), stands for the
 * test's server: its settings are the env of the blocks after it in the same file that have no note
 * (`DATABASE_URL` always the test's own); its `npm run demo` runs against it, as the tour does, and
 * creates the demo shop's tables that close_order works on.
 *
 * The README's tour starts a receiver itself (`npx punctual receiver --port 4000`): that block runs
 * as written, in a folder of its own (its key file there), the port made a free one, and
 * `127.0.0.1:4000` in later commands and settings becomes it; at the end, the line the README
 * shows it printing must be among the lines it printed (times, ids and keys aside), signed.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { freePort } from '../helpers/brokers.js';
import { type ServerProcess, startServer, waitFor } from '../helpers/server.js';

vi.setConfig({ testTimeout: 60_000 });

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/punctual.mjs', import.meta.url));
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
/** The line that starts the service, after settings or none (a `$` in one: a block the reader completes). */
const START = /^((?:[A-Z][A-Z0-9_]*=[^\s$]+\s+)*)npm start$/;
/** The tour's own receiver, and the address it listens on. */
const RECEIVER = /^(?:[A-Z][A-Z0-9_]*=[^\s$]+\s+)*npx punctual receiver\b.*--port (\d+)/;

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
  /** A block that starts the tour's receiver: its commands, the receiver's last. */
  receiver: boolean;
  /** Its env comes from an env note (not from a block that started the service). */
  noted: boolean;
  /** Its env comes from a block that started the service with settings of its own: the README's tour. */
  tour: boolean;
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

/** The settings of a `NAME=value … npm start` line, DATABASE_URL left out (a test's database is its own). */
function startSettings(line: string): Record<string, string> {
  return Object.fromEntries(
    [...(START.exec(line)?.[1] ?? '').matchAll(/([A-Z][A-Z0-9_]*)=(\S+)/g)]
      .filter(([, name]) => name !== 'DATABASE_URL')
      .map(([, name, value]) => [name!, value!]),
  );
}

function blocksOf(file: string): Block[] {
  const lines = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8').split('\n');
  const blocks: Block[] = [];
  let prose: string[] = [];
  /** The settings of the last block that started the service, for the blocks after it without a note. */
  let started: Record<string, string> | undefined;
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
    const startAt = commands.findIndex((command) => START.test(command.text));
    const starts = startAt === 0;
    const receiver = commands.some((command) => RECEIVER.test(command.text));
    if (starts) started = startSettings(commands[0]!.text);
    if (!starts && !receiver && !commands.some((command) => command.text.startsWith('curl'))) continue;
    const env =
      note === undefined
        ? starts
          ? started!
          : (started ?? {})
        : Object.fromEntries(
            note
              .trim()
              .split(/\s+/)
              .filter((pair) => pair !== '')
              .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
          );
    blocks.push({
      where: `${file}:${start}`,
      env,
      prose: text,
      commands: starts ? commands.slice(1) : commands,
      starts,
      receiver,
      noted: note !== undefined,
      tour: note === undefined && !starts && started !== undefined && Object.keys(started).length > 0,
    });
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
/** The tour's receiver, as the README starts it: its folder, its address in the docs and here, what it printed. */
const tour: { dir?: string; docAddress?: string; address?: string; child?: ChildProcess; lines: string[]; db?: TestDatabase } = {
  lines: [],
};
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
  if (tour.child !== undefined && tour.child.exitCode === null) {
    tour.child.kill('SIGINT');
    await new Promise((resolve) => tour.child!.once('exit', resolve));
  }
  if (tour.dir !== undefined) rmSync(tour.dir, { recursive: true, force: true });
});

/** `text` with the tour receiver's documented address made the one it listens on here. */
function toTour(text: string): string {
  return tour.docAddress === undefined || tour.address === undefined ? text : text.replaceAll(tour.docAddress, tour.address);
}

/**
 * Runs a receiver block as written, in a folder of its own: the commands before the receiver's
 * (its key file), then the receiver, on a free port, kept running; resolves once it listens.
 */
async function startTourReceiver(block: Block): Promise<void> {
  const at = block.commands.findIndex((command) => RECEIVER.test(command.text));
  const command = block.commands[at]!;
  tour.dir = mkdtempSync(join(tmpdir(), 'punctual-doc-tour-'));
  for (const setup of block.commands.slice(0, at)) {
    const run = await bash(setup.text, { PATH: process.env.PATH ?? '' }, tour.dir);
    expect(run.code, `${setup.where}: ${run.stderr}`).toBe(0);
  }
  const port = await freePort();
  tour.docAddress = `127.0.0.1:${RECEIVER.exec(command.text)![1]!}`;
  tour.address = `127.0.0.1:${port}`;
  // `npx punctual` is this checkout's command (the folder is not the checkout: npx would look elsewhere);
  // exec'd, after the line's settings, so that the signal at the end reaches the receiver itself.
  const text = command.text.replace(/--port \d+/, `--port ${port}`).replace(/\bnpx punctual\b/, '"$NODE" "$PUNCTUAL_BIN"');
  const child = spawn('bash', ['--norc', '--noprofile', '-c', text.replace(/^((?:[A-Z][A-Z0-9_]*=\S+\s+)*)/, '$1exec ')], {
    cwd: tour.dir,
    env: { PATH: process.env.PATH ?? '', NODE: process.execPath, PUNCTUAL_BIN: BIN },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  tour.child = child;
  createInterface({ input: child.stdout }).on('line', (line) => tour.lines.push(line));
  createInterface({ input: child.stderr }).on('line', (line) => tour.lines.push(line));
  await waitFor(
    async () => tour.lines.some((line) => line.startsWith('receiving webhooks on')),
    20_000,
    `${command.where}: the receiver to listen`,
  ).catch((error: Error) => {
    throw new Error(`${error.message}: ${tour.lines.join('\n')}`);
  });
}

/** The env a block's note names, with secrets filled in and the docs' receiver host made the test's. */
function serverEnv(block: Block): Record<string, string> {
  return Object.fromEntries(
    Object.entries(block.env).map(([name, value]) => {
      const filled = toTour(
        value.replace(/^\$(\w+)$/, (_, variable: string) => secret(variable)).replace(/\bshop\.internal\b/g, receiverHost),
      );
      // A file the tour made (its key): where it made it.
      return [
        name,
        name.endsWith('_FILE') && tour.dir !== undefined && existsSync(join(tour.dir, filled)) ? join(tour.dir, filled) : filled,
      ];
    }),
  );
}

async function serverFor(block: Block): Promise<ServerProcess> {
  const env = serverEnv(block);
  const id = JSON.stringify(Object.entries(env).sort());
  let entry = servers.get(id);
  if (entry === undefined) {
    const db = await createTestDatabase('doc_examples');
    // The tour runs on a shop's database as it is: one with an `orders` table of its own, unlike close_order's.
    if (block.tour) {
      await createShopsOwnOrders(db);
      tour.db = db;
    }
    entry = { db, server: await startServer({ env: { DATABASE_URL: db.url, ...env } }) };
    servers.set(id, entry);
  }
  return entry.server;
}

/** A shop's own `orders`, of a shape of its own, with an order in it: the tour must work beside it and leave it alone. */
const SHOPS_ORDER = { order_id: 1, order_no: 'A-1001', state: 0, amount: '99.90' };
async function createShopsOwnOrders(db: TestDatabase): Promise<void> {
  await db.execute(
    'CREATE TABLE orders (order_id BIGINT PRIMARY KEY, order_no VARCHAR(32) NOT NULL, state TINYINT NOT NULL, amount DECIMAL(10,2) NOT NULL)',
  );
  await db.execute('INSERT INTO orders SET ?', [SHOPS_ORDER]);
}

function bash(command: string, env: Record<string, string>, cwd = ROOT): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['--norc', '--noprofile', '-c', command], { cwd, env, timeout: 45_000 }, (error, stdout, stderr) =>
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
    for (const block of blocks.filter((each) => each.noted)) {
      for (const name of Object.keys(block.env)) {
        expect(block.prose.replace(/<!--[\s\S]*?-->/g, ''), `${block.where}: the prose above names ${name}`).toContain(`\`${name}\``);
      }
    }
  });

  for (const block of blocks) {
    if (block.receiver) {
      it(`${block.where}: starts the tour's receiver as written`, () => startTourReceiver(block));
      continue;
    }
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
        const text = toTour(command.text.replace(DOC_SERVICE, address).replace(DOC_RECEIVER, `http://${receiverHost}`));

        if (block.starts) {
          // The tour's `npm run demo`, small: it makes the demo shop's tables in the server's database.
          // Its DATABASE_URL is the test's (the server's) own.
          const demo = text.replace(/\bDATABASE_URL=\S+\s+/g, '');
          expect(demo, `${command.where}: only npm run demo runs beside npm start`).toMatch(/^npm run demo\b/);
          const entry = [...servers.values()].find((candidate) => candidate.server === server)!;
          const run = await bash(demo, {
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
        const others = [...text.matchAll(/https?:\/\/([^/\s'"]+)/g)]
          .map(([, host]) => host!)
          .filter((host) => host !== receiverHost && host !== tour.address);
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

  it("the tour's receiver printed the call the README shows, signed", async () => {
    const shown = [...readFileSync(new URL('../../README.md', import.meta.url), 'utf8').matchAll(/^```text\n([\s\S]*?)^```$/gm)]
      .map(([, body]) => body!.trim())
      .filter((body) => body.includes('signature ok'));
    expect(shown, 'the README shows the line its receiver prints').toHaveLength(1);
    expect(tour.child, 'the README starts its receiver').toBeDefined();
    // Times, ids and keys differ from run to run: any digits stand for the README's.
    const pattern = new RegExp(`^${shown[0]!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\d+/g, '\\d+')}$`);
    await waitFor(async () => tour.lines.some((line) => pattern.test(line)), 30_000, `the receiver to print ${shown[0]!}`).catch(
      (error: Error) => {
        throw new Error(`${error.message}; it printed: ${tour.lines.join('\n')}`);
      },
    );
    // It ran on a database with a shop's own `orders`, and left it as it was.
    expect(tour.db, "the tour's service ran on a database with the shop's own orders").toBeDefined();
    expect(await tour.db!.query<any[]>('SELECT order_id, order_no, state, amount FROM orders')).toEqual([SHOPS_ORDER]);
  });
});
