/**
 * What GET /events streams, read from the tables and not from memory: every run of a task
 * (punctual_task_runs) and every change made through the API (punctual_audit_log), so a client that reconnects
 * with Last-Event-ID gets what it missed, from any process. A position is the pair of the last
 * run id and the last change id seen.
 */
import type mysql from 'mysql2/promise';
import type { Database } from '../db/connection.js';
import { autocommit } from '../db/transaction.js';
import { decodeJson } from '../util/json.js';
import { EVENTS } from './sql/events.js';

export interface EventPosition {
  runs: number;
  changes: number;
}

export type TaskEvent =
  | {
      kind: 'run';
      id: number;
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
type ChangeRow = [number, number, string, string, string, number, unknown];

export class EventStore {
  constructor(private readonly database: Database) {}

  /** The newest position: where a stream that asks for nothing old begins. */
  async head(): Promise<EventPosition> {
    const [[row]] = await autocommit(this.database, (conn) => conn.query<Rows>(EVENTS.heads));
    return { runs: Number(row?.runs ?? 0), changes: Number(row?.changes ?? 0) };
  }

  /** Up to `limit` runs and `limit` changes after `from`, in time order. */
  async after(from: EventPosition, limit: number): Promise<TaskEvent[]> {
    return autocommit(this.database, async (conn) => {
      const [runs] = await conn.query<Rows>({ sql: EVENTS.runsAfter, rowsAsArray: true }, [from.runs, limit]);
      const [changes] = await conn.query<Rows>({ sql: EVENTS.changesAfter, rowsAsArray: true }, [from.changes, limit]);
      const events: TaskEvent[] = [
        ...(runs as unknown as RunRow[]).map(([id, taskId, attempt, outcome, at, error, httpStatus, type, key, status]) => ({
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
        ...(changes as unknown as ChangeRow[]).map(([id, at, actor, action, target, status, detail]) => ({
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
      events.sort((a, b) => a.at - b.at || (a.kind === b.kind ? a.id - b.id : a.kind === 'change' ? -1 : 1));
      // A list cut at `limit` may have older rows to come than the other list's last: keep only
      // what is no newer than the cut, the rest comes next time, still in order.
      const cuts = [runs, changes]
        .filter((list) => list.length === limit)
        .map((list) => Number((list[list.length - 1] as unknown as unknown[])[list === runs ? 4 : 1]));
      if (cuts.length === 0) return events;
      const cutoff = Math.min(...cuts);
      return events.filter((event) => event.at <= cutoff);
    });
  }
}
