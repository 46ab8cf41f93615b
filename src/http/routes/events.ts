/**
 * GET /events: Server-Sent Events of the tasks' state changes: each run (`run`: done, retry,
 * failed, lost) and each change made through the API (`change`: cancel, reschedule, retry, bulk
 * changes, pause, resume, limits). They are read from the run history and the audit trail, not
 * kept in memory, so a client that reconnects with `Last-Event-ID` gets what it missed, from
 * any process: each event's id is the position `<last run row id>.<last change id>.<last
 * successful run: finish ms>.<its run_at ms>.<its task id>` (a position of the first two alone,
 * as releases before 0.2 sent, resumes the successful runs from the window's start). An event is
 * sent once it is SETTLE_MS old (store/events.ts says why): the processes' clocks must agree
 * within that. The replay is bounded: a position more than EVENTS_REPLAY events of a kind behind
 * starts at the window's start, after a `gap` event saying how much was skipped. A stream with no
 * position starts now.
 *
 * Each stream reads the tables every EVENTS_POLL_MS (two primary-key range reads and one range of
 * the (status, finished_at, run_at, id) index), and sends a comment every 15 s so proxies keep it
 * open; at most MAX_STREAMS at once per process. A client that reads slower than the events come
 * costs a page at most: once the socket's buffer is full, the stream reads no further page until
 * it has drained, and a client that has not drained for STALL_MS is dropped, with a `dropped`
 * event saying why and a log line (it resumes from its last id when it reconnects). The read
 * role may listen, as for GET /tasks; a change event shows its actor to admin tokens only (as
 * GET /audit does). Streams end when the service stops.
 */
import type { FastifyPluginAsync } from 'fastify';
import { isAfter, START, type EventPosition, type EventStore, type TaskEvent } from '../../store/events.js';
import type { Clock } from '../../time/clock.js';
import { allows } from '../roles.js';
import { HttpError } from '../errors.js';
import type { Role } from '../../contract/auth.js';

export interface EventRoutesOptions {
  store: EventStore;
  clock: Clock;
  /** How far back a reconnect may resume, in events of each kind. */
  replay: number;
  pollMs: number;
  /** How long a client may leave its stream undrained before it is dropped (default STALL_MS). */
  stallMs?: number;
}

/** A stream whose client has read nothing of a full buffer for this long is dropped. */
export const STALL_MS = 30_000;

const MAX_STREAMS = 64;
const PAGE = 500;
const KEEPALIVE_MS = 15_000;

/** How old an event is before it is sent: a run's finish or a change's time is stamped before it commits. */
export const SETTLE_MS = 1000;

const POSITION = /^(\d{1,16})\.(\d{1,16})(?:\.(\d{1,16})\.(\d{1,16})\.(\d{1,16}))?$/;

export function formatPosition(position: EventPosition): string {
  const { done } = position;
  return `${position.runs}.${position.changes}.${done.finishedAt}.${done.runAt}.${done.id}`;
}

/** The position an id this stream sent names; undefined when it is not one. */
function parsePosition(id: string): EventPosition | undefined {
  const match = POSITION.exec(id.trim());
  if (match === null) return undefined;
  const [runs, changes, finishedAt, runAt, task] = match.slice(1).map(Number);
  const done = match[3] === undefined ? START : { finishedAt: finishedAt!, runAt: runAt!, id: task! };
  return { runs: runs!, changes: changes!, done };
}

function frame(event: string, id: string | undefined, data: unknown): string {
  return `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

function shown(event: TaskEvent, role: Role | undefined): Record<string, unknown> {
  const { kind: _kind, ...all } = event;
  const { place: _place, ...rest } = all as typeof all & { place?: unknown };
  const at = new Date(event.at).toISOString();
  if (event.kind === 'change' && !(role !== undefined && allows(role, 'admin'))) {
    const { actor: _actor, ...withoutActor } = rest as Record<string, unknown>;
    return { ...withoutActor, at };
  }
  return { ...rest, at };
}

export const eventRoutes: FastifyPluginAsync<EventRoutesOptions> = async (app, options) => {
  const streams = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const end of [...streams]) end();
  });

  app.get(
    '/events',
    {
      schema: {
        summary: "Server-Sent Events of the tasks' runs and changes, resumable with Last-Event-ID",
        tags: ['tasks'],
        produces: ['text/event-stream'],
      },
    },
    async (request, reply) => {
      if (streams.size >= MAX_STREAMS)
        throw new HttpError(503, 'PUNCTUAL_TOO_MANY_STREAMS', `at most ${MAX_STREAMS} event streams at once`);
      const { store, replay, pollMs, clock } = options;
      const stallMs = options.stallMs ?? STALL_MS;
      const given = request.headers['last-event-id'];
      const asked = typeof given === 'string' ? parsePosition(given) : undefined;
      if (typeof given === 'string' && given.trim() !== '' && asked === undefined) {
        throw new HttpError(400, 'PUNCTUAL_BAD_REQUEST', 'headers/last-event-id is not an id this stream sent');
      }
      const horizon = () => clock.now() - SETTLE_MS;
      const head = await store.head();
      let position: EventPosition = head;
      let skipped = 0;
      if (asked !== undefined) {
        const window = (await store.doneBack(replay)) ?? START;
        const done = isAfter(window, asked.done) ? window : asked.done;
        position = { runs: Math.max(asked.runs, head.runs - replay), changes: Math.max(asked.changes, head.changes - replay), done };
        skipped =
          position.runs -
          asked.runs +
          (position.changes - asked.changes) +
          (done === window ? await store.doneBetween(asked.done, window) : 0);
      }
      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      raw.write(`retry: 2000\n\n`);
      if (skipped > 0) raw.write(frame('gap', formatPosition(position), { skipped, replay }));
      let open = true;
      let timer: NodeJS.Timeout | undefined;
      let lastWrite = Date.now();
      const end = () => {
        if (!open) return;
        open = false;
        clearTimeout(timer);
        streams.delete(end);
        raw.end();
      };
      streams.add(end);
      request.raw.on('close', end);
      /** Resolves once the socket drained (true), or after stallMs without (false), or when the stream ended. */
      const drained = () =>
        new Promise<boolean>((resolve) => {
          const done = (value: boolean) => {
            clearTimeout(stall);
            raw.off('drain', onDrain);
            raw.off('close', onClose);
            resolve(value);
          };
          const onDrain = () => done(true);
          const onClose = () => done(true);
          const stall = setTimeout(() => done(false), stallMs);
          raw.on('drain', onDrain);
          raw.on('close', onClose);
        });
      const tick = async () => {
        if (!open) return;
        try {
          const events = await store.after(position, PAGE, horizon());
          let full = false;
          for (const event of events) {
            if (event.kind === 'change') position = { ...position, changes: event.id };
            else if (event.id !== null) position = { ...position, runs: event.id };
            else position = { ...position, done: event.place! };
            if (!raw.write(frame(event.kind, formatPosition(position), shown(event, request.role)))) full = true;
          }
          // The client reads slower than the events come: no further page until it drained.
          if (full && open && !(await drained())) {
            const buffered = raw.writableLength;
            request.log.warn({ bufferedBytes: buffered, stallMs }, 'events: a client read nothing for too long; its stream is dropped');
            raw.write(
              frame('dropped', undefined, {
                reason: `the client read nothing of ${buffered} bytes for ${stallMs} ms; reconnect with Last-Event-ID to resume`,
              }),
            );
            end();
            return;
          }
          if (events.length > 0) lastWrite = Date.now();
          else if (Date.now() - lastWrite >= KEEPALIVE_MS) {
            raw.write(': keep-alive\n\n');
            lastWrite = Date.now();
          }
          // A full page: more is waiting, read on at once.
          if (open) timer = setTimeout(() => void tick(), events.length >= PAGE ? 0 : pollMs);
        } catch (error) {
          request.log.warn({ err: error }, 'events: a read failed; the stream ends, the client resumes from its last id');
          end();
        }
      };
      void tick();
    },
  );
};
