/**
 * What GET /events streams, read from the tables and not from memory: every run of a task (the run
 * history: rows in punctual_task_runs, and the successful runs on record in their tasks' rows) and
 * every change made through the API (punctual_audit_log), so a client that reconnects with
 * Last-Event-ID gets what it missed, from any process. A position is the last run row id, the
 * last change id and the last successful run's place (finished_at, run_at, task id) seen.
 *
 * Only what finished by a horizon (the caller's: a moment ago) is read. A run's finish and a
 * change's time are stamped before their transaction commits; a reader that went on to later ones
 * at once could pass one that commits a little after them and never see it.
 */
import type mysql from 'mysql2/promise';
import type { Database } from '../db/connection.js';
import { autocommit } from '../db/transaction.js';
import { decodeJson } from '../util/json.js';
import { EVENTS } from './sql/events.js';

/** A successful run's place in the stream: its task's finish, run_at and id. */
export interface DonePlace {
  finishedAt: number;
  runAt: number;
  id: number;
}

export interface EventPosition {
  runs: number;
  changes: number;
  done: DonePlace;
}

/** Before every successful run. */
export const START: DonePlace = { finishedAt: 0, runAt: 0, id: 0 };

/** Whether `a` comes after `b` in the stream of successful runs. */
export function isAfter(a: DonePlace, b: DonePlace): boolean {
  return a.finishedAt !== b.finishedAt ? a.finishedAt > b.finishedAt : a.runAt !== b.runAt ? a.runAt > b.runAt : a.id > b.id;
}

/** DONE_AFTER's values for `place` (sql/events.ts). */
function afterValues(place: DonePlace): unknown[] {
  const finished = new Date(place.finishedAt);
  const runAt = new Date(place.runAt);
  return [finished, finished, runAt, runAt, place.id];
}

export type TaskEvent =
  | {
      kind: 'run';
      /** The run's row; null for a successful run, on record in its task's row (then `place` says where it is). */
      id: number | null;
      place?: DonePlace;
      at: number;
      taskId: number;
      type: string;
      key: string | null;
      /** The task's status now. */
      status: string;
      attempt: number;
      outcome: string;
      error: string | null;
      httpStatus: number | null;
    }
  | { kind: 'change'; id: number; at: number; actor: string; action: string; target: string; status: number; result: unknown };

type Rows = mysql.RowDataPacket[];
type RunRow = [number, number, number, string, number, string | null, number | null, string, string | null, string];
type DoneRow = [number, number, number, number, number | null, string, string | null];
type ChangeRow = [number, number, string, string, string, number, unknown];

export class EventStore {
  constructor(private readonly database: Database) {}

  /** The newest position: where a stream that asks for nothing old begins. */
  async head(): Promise<EventPosition> {
    const [[row]] = await autocommit(this.database, (conn) => conn.query<Rows>(EVENTS.heads));
    return { runs: Number(row?.runs ?? 0), changes: Number(row?.changes ?? 0), done: (await this.doneBack(0)) ?? START };
  }

  /** The place of the successful run `back` places before the newest; none when there are not so many. */
  async doneBack(back: number): Promise<DonePlace | undefined> {
    const [rows] = await autocommit(this.database, (conn) => conn.query<Rows>({ sql: EVENTS.doneBack, rowsAsArray: true }, [back]));
    const row = rows[0] as unknown as [number, number, number] | undefined;
    return row === undefined ? undefined : { finishedAt: Number(row[0]), runAt: Number(row[1]), id: Number(row[2]) };
  }

  /** How many successful runs lie after `from` and up to `to`. */
  async doneBetween(from: DonePlace, to: DonePlace): Promise<number> {
    const [[row]] = await autocommit(this.database, (conn) =>
      conn.query<Rows>({ sql: EVENTS.doneBetween, rowsAsArray: true }, [
        new Date(from.finishedAt),
        ...afterValues(from),
        ...afterValues(to),
      ]),
    );
    return Number((row as unknown as [number] | undefined)?.[0] ?? 0);
  }

  /** Up to `limit` runs of each record and `limit` changes after `from` and by `horizon`, in time order. */
  async after(from: EventPosition, limit: number, horizon: number): Promise<TaskEvent[]> {
    return autocommit(this.database, async (conn) => {
      // Rows come in id order; what comes after the first past the horizon waits for the next read.
      const upTo = <T>(rows: T[], at: (row: T) => number) => {
        const past = rows.findIndex((row) => at(row) > horizon);
        return { rows: past < 0 ? rows : rows.slice(0, past), full: rows.length === limit };
      };
      const [runRows] = await conn.query<Rows>({ sql: EVENTS.runsAfter, rowsAsArray: true }, [from.runs, limit]);
      const runs = upTo(runRows as unknown as RunRow[], (row) => Number(row[4]));
      const [changeRows] = await conn.query<Rows>({ sql: EVENTS.changesAfter, rowsAsArray: true }, [from.changes, limit]);
      const changes = upTo(changeRows as unknown as ChangeRow[], (row) => Number(row[1]));
      const [doneRows] = await conn.query<Rows>({ sql: EVENTS.doneAfter, rowsAsArray: true }, [
        new Date(from.done.finishedAt),
        ...afterValues(from.done),
        new Date(horizon),
        limit,
      ]);
      const done = { rows: doneRows as unknown as DoneRow[], full: doneRows.length === limit };
      const lists: TaskEvent[][] = [
        runs.rows.map(([id, taskId, attempt, outcome, at, error, httpStatus, type, key, status]) => ({
          kind: 'run' as const,
          id: Number(id),
          at: Number(at),
          taskId: Number(taskId),
          type: String(type),
          key,
          status: String(status),
          attempt: Number(attempt),
          outcome: String(outcome),
          error,
          httpStatus: httpStatus === null ? null : Number(httpStatus),
        })),
        done.rows.map(([taskId, attempt, at, runAt, httpStatus, type, key]) => ({
          kind: 'run' as const,
          id: null,
          place: { finishedAt: Number(at), runAt: Number(runAt), id: Number(taskId) },
          at: Number(at),
          taskId: Number(taskId),
          type: String(type),
          key,
          status: 'done',
          attempt: Number(attempt),
          outcome: 'done',
          error: null,
          httpStatus: httpStatus === null ? null : Number(httpStatus),
        })),
        changes.rows.map(([id, at, actor, action, target, status, detail]) => ({
          kind: 'change' as const,
          id: Number(id),
          at: Number(at),
          actor: String(actor),
          action: String(action),
          target: String(target),
          status: Number(status),
          result: detail === null ? null : ((decodeJson(detail) as { result?: unknown } | null)?.result ?? null),
        })),
      ];
      // Merged in time order, at one instant changes first, each list kept in its own order: a
      // list's position only goes forward (its rows' times need not follow their ids). A list cut
      // at `limit` may have older rows to come than the other lists' last: the merge stops at the
      // first event newer than the cut, so what is sent is a prefix of each list and the rest
      // comes next time, still in order.
      const cuts = [runs.full, done.full, changes.full].flatMap((full, k) =>
        full && lists[k]!.length > 0 ? [lists[k]![lists[k]!.length - 1]!.at] : [],
      );
      const cutoff = cuts.length === 0 ? Number.POSITIVE_INFINITY : Math.min(...cuts);
      const rank = (k: number) => (k === 2 ? -1 : k);
      const next = lists.map(() => 0);
      const events: TaskEvent[] = [];
      for (;;) {
        let pick = -1;
        for (const [k, list] of lists.entries()) {
          const head = list[next[k]!];
          if (head === undefined) continue;
          const best = pick < 0 ? undefined : lists[pick]![next[pick]!]!;
          if (best === undefined || head.at < best.at || (head.at === best.at && rank(k) < rank(pick))) pick = k;
        }
        if (pick < 0) break;
        const event = lists[pick]![next[pick]!]!;
        // The first event always goes: a list whose rows run back in time (a full page that starts
        // past its own last) must not hold the stream still.
        if (event.at > cutoff && events.length > 0) break;
        events.push(event);
        next[pick]!++;
      }
      return events;
    });
  }
}
