/**
 * Every statement about the punctual_audit_log table (store/audit.ts runs them). Times come back as epoch
 * milliseconds computed by the server (rows.ts), as in the tasks catalogue.
 */
import { ms } from '../rows.js';

const COLUMNS = `id, ${ms('at')}, actor, role, request_id, action, target, status, detail`;

/** Which filters a page of the trail has (each one a placeholder, in this order). */
export interface AuditFilter {
  actor: boolean;
  action: boolean;
  target: boolean;
  since: boolean;
  until: boolean;
}

export const AUDIT = {
  insert: 'INSERT INTO punctual_audit_log (at, actor, role, request_id, action, target, status, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
  /** Newest first, before the id ?, with the filters given. */
  page: (f: AuditFilter) =>
    `SELECT ${COLUMNS} FROM punctual_audit_log WHERE id < ?${f.actor ? ' AND actor = ?' : ''}${f.action ? ' AND action = ?' : ''}` +
    `${f.target ? ' AND target = ?' : ''}${f.since ? ' AND at >= ?' : ''}${f.until ? ' AND at < ?' : ''} ORDER BY id DESC LIMIT ?`,
  /** Up to ? entries older than ?, oldest first, by the `at` index: retention's small batches. */
  deleteBefore: 'DELETE FROM punctual_audit_log WHERE at < ? ORDER BY at LIMIT ?',
} as const;
