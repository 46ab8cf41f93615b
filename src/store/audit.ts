/**
 * The audit trail's store: one row per change made through the API (sql/audit.ts). Written on a
 * connection of its own; read newest first, a page at a time; deleted by age in small batches.
 */
import type mysql from 'mysql2/promise';
import type { Database } from '../db/connection.js';
import { autocommit } from '../db/transaction.js';
import { decodeJson } from '../util/json.js';
import { AUDIT } from './sql/audit.js';

/** One change on record; `at` in epoch milliseconds. */
export interface AuditEntry {
  id: number;
  at: number;
  actor: string;
  role: string;
  requestId: string;
  action: string;
  target: string;
  status: number;
  detail: unknown;
}

export type NewAuditEntry = Omit<AuditEntry, 'id'>;

export interface AuditQuery {
  actor?: string;
  action?: string;
  target?: string;
  since?: number;
  until?: number;
  /** Entries before this id (a previous page's last). */
  before?: number;
  limit: number;
}

type AuditRow = [number, number, string, string, string, string, string, number, unknown];

export class AuditStore {
  constructor(private readonly database: Database) {}

  async record(entry: NewAuditEntry): Promise<void> {
    const { at, actor, role, requestId, action, target, status, detail } = entry;
    await autocommit(this.database, (conn) =>
      conn.query(AUDIT.insert, [
        new Date(at),
        actor.slice(0, 64),
        role,
        requestId.slice(0, 64),
        action,
        target.slice(0, 255),
        status,
        detail === undefined ? null : JSON.stringify(detail),
      ]),
    );
  }

  async page(query: AuditQuery): Promise<AuditEntry[]> {
    const { actor, action, target, since, until } = query;
    const filter = {
      actor: actor !== undefined,
      action: action !== undefined,
      target: target !== undefined,
      since: since !== undefined,
      until: until !== undefined,
    };
    const values: unknown[] = [query.before ?? Number.MAX_SAFE_INTEGER];
    if (actor !== undefined) values.push(actor);
    if (action !== undefined) values.push(action);
    if (target !== undefined) values.push(target);
    if (since !== undefined) values.push(new Date(since));
    if (until !== undefined) values.push(new Date(until));
    values.push(query.limit);
    const [rows] = await autocommit(this.database, (conn) =>
      conn.query<AuditRow[] & mysql.RowDataPacket[]>({ sql: AUDIT.page(filter), rowsAsArray: true }, values),
    );
    return rows.map(([id, at, actorName, role, requestId, actionName, targetName, status, detail]) => ({
      id: Number(id),
      at: Number(at),
      actor: actorName,
      role,
      requestId,
      action: actionName,
      target: targetName,
      status: Number(status),
      detail: detail === null ? null : decodeJson(detail),
    }));
  }

  /** Deletes up to `limit` entries older than `before`; answers how many went. */
  async deleteBefore(before: number, limit: number): Promise<number> {
    const [result] = await autocommit(this.database, (conn) =>
      conn.query<mysql.ResultSetHeader>(AUDIT.deleteBefore, [new Date(before), limit]),
    );
    return result.affectedRows;
  }
}
