/**
 * The one range every instant a request carries is checked against (filters, cursors, runAt,
 * reschedules, bulk moves, a nack's retryAt): the instants a task's times may take
 * (store/task-types.ts). Past them a filter matched every row: `'10000-01-01 …'` compares as text.
 * A create's runAt is held to ten years ahead besides (time/zones.ts); a bulk shift leaves a task
 * it would move out of the range where it is (lifecycle/bulk.ts).
 */
import { EARLIEST_INSTANT_MS, LATEST_INSTANT_MS } from '../store/task-types.js';
import { badRequest } from './errors.js';
const RANGE = `${new Date(EARLIEST_INSTANT_MS).toISOString()} and ${new Date(LATEST_INSTANT_MS).toISOString()}`;

/** `ms` if it lies in the range, else a 400 naming `field` and the range. */
export function storedInstant(field: string, ms: number): number {
  if (!(ms >= EARLIEST_INSTANT_MS && ms <= LATEST_INSTANT_MS)) throw badRequest(field, `must be between ${RANGE}`);
  return ms;
}

/** An instant with its offset (or Z): a naive time would be read in some zone nobody named. */
const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/;

/** A query's instant (`querystring/<name>`): ISO-8601 with an offset, within the range; undefined when absent. */
export function queryInstant(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const field = `querystring/${name}`;
  const at = ISO_WITH_OFFSET.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(at)) throw badRequest(field, 'must be an ISO-8601 instant with an offset, e.g. 2026-12-01T10:00:00+08:00');
  return storedInstant(field, at);
}
