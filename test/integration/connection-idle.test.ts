/**
 * A pooled connection that sat idle is pinged before use; one just used is not. How long it sat
 * is measured on the monotonic clock: a step of the wall clock (only Date is faked here) must not
 * make a connection look idle when it was just used, nor fresh when it sat idle.
 */
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Database, type Connection } from '../../src/db/connection.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';

let db: TestDatabase;
let database: Database | undefined;

/** The idle time past which a connection is pinged before use (connection.ts). */
const VALIDATE_AFTER_IDLE_MS = 1000;

beforeAll(async () => {
  db = await createTestDatabase('connection_idle');
});

afterAll(async () => {
  vi.useRealTimers();
  await database?.close();
  await db?.drop();
});

describe('idle connections', () => {
  it('are pinged after sitting idle, not after being used, whichever way the wall clock steps', async () => {
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    // One connection, so every use below gets the same one back.
    database = new Database({ url: db.url, poolSize: 1, lockWaitTimeoutS: 5 });
    let core: Connection['connection'] | undefined;
    await database.withConnection(async (conn) => void (core = conn.connection));
    const pinged = vi.spyOn(core!, 'ping');
    const use = () => database!.withConnection(async (conn) => expect(conn.connection).toBe(core));

    // The wall clock steps back an hour: the connection was used a moment ago, it is not idle.
    vi.setSystemTime(Date.now() - 3600_000);
    await use();
    expect(pinged).not.toHaveBeenCalled();

    // It sits idle past the threshold (monotonic time), and the wall clock steps back another hour
    // meanwhile: by the wall clock it was released in the future, yet it sat idle. Pinged.
    const released = performance.now();
    await waitFor(async () => performance.now() - released > VALIDATE_AFTER_IDLE_MS + 100, 10_000, 'the connection to sit idle');
    vi.setSystemTime(Date.now() - 3600_000);
    await use();
    expect(pinged).toHaveBeenCalledTimes(1);

    // The wall clock steps two hours forward: used a moment ago, still not idle.
    vi.setSystemTime(Date.now() + 7200_000);
    await use();
    expect(pinged).toHaveBeenCalledTimes(1);
  });
});
