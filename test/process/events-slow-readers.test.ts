/**
 * GET /events against clients that never read, black-box as the attack review found it: three
 * streams opened with a read token over raw sockets that are then paused, while 20,000 runs of
 * 2 KB errors land in the run history. Before, each stream read page after page into its socket's
 * buffer regardless (the heap grew by the whole history per stream: 134-153 MB for six); now a
 * stream reads no further page until its client drained, and is dropped after EVENTS_STALL_MS
 * with a `dropped` event and a log line. The process's heap is read from its own /metrics.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startServer, waitFor, type ServerProcess } from '../helpers/server.js';

const READER = 'events-read-token-0123456789ab';
const ADMIN = 'events-admin-token-0123456789a';
const RUNS = 20_000;
const STREAMS = 3;

let db: TestDatabase;
let server: ServerProcess;
const sockets: Socket[] = [];

beforeAll(async () => {
  db = await createTestDatabase('events_slow');
  server = await startServer({
    env: { DATABASE_URL: db.url, API_TOKENS_READ: READER, API_TOKENS_ADMIN: ADMIN, EVENTS_POLL_MS: '100', EVENTS_STALL_MS: '4000' },
  });
});

afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await server?.stop();
  await db?.drop();
});

/** The process's heap in use, from its own /metrics. */
async function heapUsed(): Promise<number> {
  const response = await fetch(`${server.baseUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } });
  const line = (await response.text()).split('\n').find((text) => text.startsWith('nodejs_heap_size_used_bytes'));
  return Number(line?.split(' ')[1]);
}

/** A stream opened over a raw socket that reads its headers and then nothing more. */
async function stalledStream(): Promise<{ socket: Socket; received: () => string }> {
  const { hostname, port } = new URL(server.baseUrl);
  const socket = connect({ host: hostname, port: Number(port) });
  sockets.push(socket);
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(`GET /events HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${READER}\r\nAccept: text/event-stream\r\n\r\n`);
  await waitFor(async () => text.includes('retry: 2000'), 5000, 'the stream to open');
  // From here on the client reads nothing: the kernel's buffers fill, then the server's.
  socket.pause();
  return { socket, received: () => text };
}

describe('event streams whose clients do not read', () => {
  it('cost bounded memory, and are dropped with a reason once stalled past EVENTS_STALL_MS', async () => {
    const before = await heapUsed();
    const streams = await Promise.all(Array.from({ length: STREAMS }, () => stalledStream()));
    // A task to hang the runs on, and 20,000 runs of it with 2 KB errors, straight into the history.
    const { insertId: taskId } = await db.execute(
      "INSERT INTO punctual_tasks (type, payload, run_at, status) VALUES ('close_order', '{}', NOW(3), 'failed')",
    );
    const error = 'x'.repeat(2000);
    for (let start = 0; start < RUNS; start += 2000) {
      const rows = Array.from({ length: 2000 }, (_, i) => [taskId, start + i + 1, 'retry', error, 'a-process']);
      await db.execute(
        'INSERT INTO punctual_task_runs (task_id, attempt, outcome, due_at, started_at, finished_at, lateness_ms, duration_ms, error, process) ' +
          `VALUES ${rows.map(() => '(?, ?, ?, NOW(3), NOW(3), NOW(3), 0, 1, ?, ?)').join(', ')}`,
        rows.flat(),
      );
    }
    // Every page the streams would read is there now; give them the time to read it all (50 ms a page at most).
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const during = await heapUsed();
    console.log(
      `${STREAMS} stalled streams, ${RUNS} runs of 2 KB (${((RUNS * 2) / 1024).toFixed(0)} MB each): heap ${(before / 2 ** 20).toFixed(0)} MB before, ${(during / 2 ** 20).toFixed(0)} MB with them`,
    );
    // Unbounded, each stream holds the whole history in its buffer (40 MB each, 120 MB in all).
    expect(during - before).toBeLessThan(40 * 2 ** 20);

    // Stalled past EVENTS_STALL_MS: dropped, each with a log line (the `dropped` event is in what was never read).
    await waitFor(
      async () => server.logs.filter((line) => /read nothing for too long/.test(line.msg)).length === STREAMS,
      15_000,
      'each stalled stream to be dropped',
    );
    // A client that reads again finds the `dropped` event at the end of what it was sent, then the end.
    const reader = streams[0]!;
    reader.socket.resume();
    await waitFor(async () => /event: dropped/.test(reader.received()), 15_000, 'the dropped event');
    expect(reader.received()).toMatch(/reconnect with Last-Event-ID/);
    // And the service still serves a stream that reads.
    const fresh = await fetch(`${server.baseUrl}/events`, { headers: { authorization: `Bearer ${READER}` } });
    expect(fresh.status).toBe(200);
    await fresh.body?.cancel();
  }, 120_000);
});
