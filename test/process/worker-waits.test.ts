/**
 * Long polls never take the connections a shop's creates need, black-box as the attack review
 * found it (MAX_CONNECTIONS=40, 40 long polls from one worker token, then the shop's creates
 * failed): one token's waits are capped (WORKER_MAX_WAITING_PER_TOKEN, one more is a 503 at once,
 * its connection closed), and a configuration whose waits could fill the server is refused at start.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startServer, waitFor, type ServerProcess } from '../helpers/server.js';
import { startFailure } from '../helpers/start-failure.js';

const WORKER = 'waits-worker-token-0123456789';
const SHOP = 'waits-write-token-01234567890';

let db: TestDatabase;
let server: ServerProcess | undefined;

beforeAll(async () => {
  db = await createTestDatabase('worker_waits');
});

afterAll(async () => {
  await server?.stop();
  await db?.drop();
});

/** One request on a connection of its own (closed after the answer), as many clients would. */
function call(path: string, token: string, body: unknown): Promise<number> {
  const { hostname, port } = new URL(server!.baseUrl);
  return new Promise((resolve) => {
    const req = httpRequest(
      {
        host: hostname,
        port: Number(port),
        path,
        method: 'POST',
        agent: false,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(0)); // dropped: the server had no connection left
    req.end(JSON.stringify(body));
  });
}

describe('lease requests that wait', () => {
  it('a configuration whose waits could take half the connections or more is refused at start, naming both settings', async () => {
    const failure = await startFailure({ DATABASE_URL: db.url, WORKER_TYPES: 'w_pull', MAX_CONNECTIONS: '40' });
    expect(failure.line).toMatch(/WORKER_MAX_WAITING \(500\) may be at most half of MAX_CONNECTIONS \(40\)/);
  });

  it("one token's waits are capped, and the shop's creates still get through", async () => {
    server = await startServer({
      env: {
        DATABASE_URL: db.url,
        WORKER_TYPES: 'w_pull',
        MAX_CONNECTIONS: '40',
        WORKER_MAX_WAITING: '20',
        WORKER_MAX_WAITING_PER_TOKEN: '8',
        API_TOKENS_WORKER: WORKER,
        API_TOKENS_WRITE: SHOP,
      },
    });
    // 40 long polls from one worker fleet, at once.
    const refused: number[] = [];
    const polls = Array.from({ length: 40 }, () =>
      call('/workers/lease', WORKER, { types: ['w_pull'], waitMs: 20_000 }).then((status) => {
        if (status === 503) refused.push(status);
        return status;
      }),
    );
    // The eight waiting, the others answered 503 at once (their connections closed).
    await waitFor(async () => refused.length === 32, 10_000, '32 refused');
    // Meanwhile, the shop: 20 creates, each on a connection of its own.
    const creates = await Promise.all(
      Array.from({ length: 20 }, (_, n) => call('/tasks', SHOP, { type: 'close_order', payload: { orderSn: `W${n}` }, delayMs: 600_000 })),
    );
    expect(creates.filter((status) => status === 201)).toHaveLength(20);
    await server.stop(); // a stop answers the waiting ones at once
    server = undefined;
    const statuses = await Promise.all(polls);
    // 8 waited (answered 200 with no task at the stop, or dropped by it), the other 32 were refused at once.
    expect(statuses.filter((status) => status === 503)).toHaveLength(32);
    expect(statuses.filter((status) => status !== 503)).toHaveLength(8);
  }, 60_000);
});
