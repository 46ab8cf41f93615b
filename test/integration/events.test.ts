/**
 * GET /events against MariaDB over a real socket: runs and changes arrive as Server-Sent Events;
 * a client that disconnects and reconnects with Last-Event-ID gets exactly what it missed (each
 * event once), a position too far behind starts at the window after a `gap`, and the read role may
 * listen but is not shown who made a change.
 */
import { describe, expect, it } from 'vitest';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService } from '../helpers/service.js';
import { serviceFixture } from '../helpers/fixture.js';

const ADMIN = 'events-admin-token-0123456789';
const VIEWER = 'events-read-token-0123456789';

const fixture = serviceFixture('events');
let base: string;

const quick = testHandler('quick_event', async () => undefined);

interface Received {
  id: string | undefined;
  event: string;
  data: any;
}

/** An open stream: what arrived so far, and how to close it. */
async function listen(token: string, lastEventId?: string) {
  const controller = new AbortController();
  const response = await fetch(`${base}/events`, {
    headers: { authorization: `Bearer ${token}`, ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }) },
    signal: controller.signal,
  });
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/event-stream');
  const events: Received[] = [];
  const reading = (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const fields = Object.fromEntries(
            block
              .split('\n')
              .filter((line) => line !== '' && !line.startsWith(':'))
              .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trimStart()]),
          );
          if (fields.event !== undefined) events.push({ id: fields.id, event: fields.event, data: JSON.parse(fields.data ?? 'null') });
        }
      }
    } catch {
      // aborted
    }
  })();
  return {
    events,
    async close() {
      controller.abort();
      await reading;
    },
  };
}

async function runTask(n: number): Promise<number> {
  const answer = await fixture.service!.call(
    'POST',
    '/tasks',
    { type: 'quick_event', payload: { n }, delayMs: 0 },
    { authorization: `Bearer ${ADMIN}` },
  );
  expect(answer.status).toBe(201);
  const id = answer.body.id as number;
  await waitFor(
    async () => (await fixture.db.query<any>("SELECT id FROM punctual_tasks WHERE id = ? AND status = 'done'", [id])).length > 0,
    10_000,
  );
  return id;
}

async function start(env: Record<string, string> = {}) {
  fixture.service = await startTestService(
    fixture.db,
    { API_TOKENS: `ops:admin:${ADMIN},wall:read:${VIEWER}`, EVENTS_POLL_MS: '50', PORT: '0', ...env },
    { handlers: [quick] },
  );
  base = await fixture.service.start();
}

describe('GET /events', () => {
  it('streams runs and changes, and a reconnect with Last-Event-ID gets exactly what it missed', async () => {
    await start();
    const first = await listen(ADMIN);
    const a = await runTask(1);
    const b = await runTask(2);
    const pending = await fixture.service!.call(
      'POST',
      '/tasks',
      { type: 'quick_event', delayMs: 3_600_000 },
      { authorization: `Bearer ${ADMIN}` },
    );
    expect(
      (await fixture.service!.call('POST', `/tasks/${pending.body.id}/cancel`, undefined, { authorization: `Bearer ${ADMIN}` })).status,
    ).toBe(200);
    await waitFor(async () => first.events.length >= 3, 10_000, 'the first events');
    await first.close();
    expect(first.events.map((e) => [e.event, e.data.taskId ?? e.data.target])).toEqual([
      ['run', a],
      ['run', b],
      ['change', `task:${pending.body.id}`],
    ]);
    expect(first.events[0]!.data).toMatchObject({ type: 'quick_event', status: 'done', outcome: 'done', attempt: 1 });
    // A successful run is on record in its task's row: it has no run id of its own.
    expect(first.events[0]!.data.id).toBeNull();
    expect(first.events[0]!.data).not.toHaveProperty('place');
    expect(first.events[2]!.data).toMatchObject({ action: 'cancel', actor: 'ops', result: { status: 'cancelled' } });
    const last = first.events[first.events.length - 1]!.id!;

    // Missed while away.
    const c = await runTask(3);
    const d = await runTask(4);
    const again = await listen(ADMIN, last);
    await waitFor(async () => again.events.length >= 2, 10_000, 'the missed events');
    const e = await runTask(5);
    await waitFor(async () => again.events.length >= 3, 10_000, 'a new event');
    await again.close();
    // Each once, in order, nothing seen before repeated.
    expect(again.events.map((event) => event.data.taskId)).toEqual([c, d, e]);
    const ids = [...first.events, ...again.events].map((event) => event.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('starts at the window after a gap when the position is too far behind, and refuses an id it never sent', async () => {
    await start({ EVENTS_REPLAY: '2' });
    const ran: number[] = [];
    for (let i = 0; i < 4; i++) ran.push(await runTask(10 + i));
    const stream = await listen(ADMIN, '0.0');
    const runs = () => stream.events.filter((event) => event.event === 'run');
    await waitFor(async () => runs().length >= 2, 10_000, 'the gap and the window');
    await stream.close();
    expect(stream.events[0]).toMatchObject({ event: 'gap', data: { replay: 2 } });
    expect(stream.events[0]!.data.skipped).toBeGreaterThanOrEqual(2);
    // Only the last two runs: the window, not the whole history.
    expect(runs().map((event) => event.data.taskId)).toEqual(ran.slice(2));
    const bad = await fetch(`${base}/events`, { headers: { authorization: `Bearer ${ADMIN}`, 'last-event-id': 'yesterday' } });
    expect(bad.status).toBe(400);
  });

  it('lets the read role listen without showing who made a change, and no token none', async () => {
    await start();
    const stream = await listen(VIEWER);
    const pending = await fixture.service!.call(
      'POST',
      '/tasks',
      { type: 'quick_event', delayMs: 3_600_000 },
      { authorization: `Bearer ${ADMIN}` },
    );
    await fixture.service!.call('POST', `/tasks/${pending.body.id}/cancel`, undefined, { authorization: `Bearer ${ADMIN}` });
    await waitFor(async () => stream.events.length >= 1, 10_000, 'the change');
    await stream.close();
    expect(stream.events[0]!.data).toMatchObject({ action: 'cancel', target: `task:${pending.body.id}` });
    expect(stream.events[0]!.data).not.toHaveProperty('actor');
    expect((await fetch(`${base}/events`)).status).toBe(401);
  });

  it('ends its streams when the service stops', async () => {
    await start();
    const stream = await listen(ADMIN);
    const started = Date.now();
    await fixture.service!.stop();
    fixture.service = undefined;
    await stream.close();
    expect(Date.now() - started).toBeLessThan(5000);
  });
});
