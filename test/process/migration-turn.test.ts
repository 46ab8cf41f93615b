/**
 * Two starts on one database, and signals, while migrations run: the built server through a proxy
 * that holds back the server's answer to one statement (0013's ALTER), so the start is caught
 * inside it for as long as the test likes.
 * - A second start waits for the first, says once for whom, never migrates beside it, and is
 *   ready within seconds of the first one's kill.
 * - Two SIGTERMs 100 ms apart (npm forwarding the one a process manager sent) during the
 *   statement: one stop, after the statement, exit 0; the next start finishes the migrations.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { migrationJournal } from '../../src/db/migration-files.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { recordedMigrations } from '../helpers/migration-kills.js';
import { Proxy } from '../helpers/proxy.js';
import { killLeftoverServers, launchServer, startServer, waitFor, type LaunchedServer } from '../helpers/server.js';

vi.setConfig({ testTimeout: 90_000 });

const HELD = '/* punctual 0013_task_group 1/1 */';
let db: TestDatabase | undefined;
let proxy: Proxy | undefined;

afterEach(async () => {
  killLeftoverServers();
  await proxy?.stop();
  await db?.drop();
});

/** A start whose answer to 0013's ALTER is held until `release()`. */
async function startHeld(database: TestDatabase): Promise<{ server: LaunchedServer; held: Promise<void>; release: () => void }> {
  let release: (() => void) | undefined;
  let onHeld: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (onHeld = resolve));
  proxy = await new Proxy({
    onQuery: (query) =>
      query.startsWith(HELD)
        ? (_answer, deliver) => {
            release = deliver;
            onHeld();
            return 'drop';
          }
        : undefined,
  }).start();
  const server = launchServer({ env: { DATABASE_URL: proxy.url(database.name) } });
  await Promise.race([
    held,
    server.exited.then((code) => Promise.reject(new Error(`exited with ${code} before 0013: ${server.stderr.join(' ')}`))),
  ]);
  return { server, held, release: () => release?.() };
}

describe('a start inside its migrations', () => {
  it('is waited for by a second start, which says once for whom, and is taken over within seconds of its kill', async () => {
    db = await createTestDatabase('migturn', { create: false });
    const first = await startHeld(db);
    const second = launchServer({ env: { DATABASE_URL: db.url } });
    const waiting = await waitFor(
      async () => second.logs.find((line) => line.msg.startsWith('waiting for the migration turn')),
      20_000,
      'the second start to say it waits',
    );
    expect(String((waiting.waitingFor as { holder: string }).holder)).toContain(`:${first.server.child.pid}:`);
    expect(waiting.waitingFor).toMatchObject({ since: expect.any(String), until: expect.any(String) });
    // The first one renews its turn while its statement runs: the second goes on waiting past the
    // turn's 10 s, and never migrates beside it.
    const until = async () => String((await db!.query<any[]>('SELECT until FROM punctual_migration_turn'))[0]?.until);
    const firstUntil = await until();
    await waitFor(async () => (await until()) !== firstUntil, 10_000, 'a renewal');
    await new Promise((resolve) => setTimeout(resolve, 11_000));
    expect(second.logs.filter((line) => line.msg.startsWith('waiting for the migration turn'))).toHaveLength(1);
    expect(second.logs.filter((line) => line.msg === 'migration applied')).toEqual([]);
    first.server.child.kill('SIGKILL');
    const killedAt = Date.now();
    await second.ready;
    const takeoverMs = Date.now() - killedAt;
    console.log(`ready ${takeoverMs} ms after the holder's kill`);
    expect(takeoverMs).toBeLessThan(15_000);
    expect(second.logs.some((line) => line.msg === 'took over the migration turn of a process that is gone')).toBe(true);
    expect(await recordedMigrations(db)).toBe(migrationJournal().length);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  it('stops once on two SIGTERMs 100 ms apart, after the statement in flight, and the next start finishes', async () => {
    db = await createTestDatabase('migsignal', { create: false });
    const { server, release } = await startHeld(db);
    server.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 100));
    server.child.kill('SIGTERM');
    await waitFor(async () => server.logs.some((line) => line.msg === 'stopping once the migration statement in flight is done'));
    await waitFor(async () => server.logs.some((line) => line.msg.startsWith('the same signal again at once')));
    expect(server.child.exitCode).toBeNull(); // still inside the statement
    release();
    expect(await server.exited).toBe(0);
    const stopped = server.logs.find((line) => line.msg.startsWith('migration stopped between two statements'));
    expect(stopped).toMatchObject({ migration: '0014_run_history', statementsDone: 0 });
    expect(server.logs.filter((line) => line.msg === 'migration applied').at(-1)).toMatchObject({ migration: '0013_task_group' });
    const next = await startServer({ env: { DATABASE_URL: db.url } });
    expect(next.logs.find((line) => line.msg === 'migration applied')).toMatchObject({ migration: '0014_run_history' });
    expect(await recordedMigrations(db)).toBe(migrationJournal().length);
    expect(await next.stop()).toBe(0);
  });
});
