/**
 * The retention sweep's two statements. Old finished rows are found through the
 * (status, finished_at) index a small batch at a time, then deleted by primary key: each DELETE
 * locks only the rows it names, for a moment, so the sweep never holds up intake or firing.
 *
 * The DELETE checks the status and the age again: a failed task retried between the SELECT and
 * the DELETE is pending again and stays. Two processes sweeping at once select the same ids; the
 * second DELETE finds them gone and removes nothing, so running it everywhere is harmless.
 *
 * The first task of a recurring series carries the series' key, and its id is the series' id:
 * while the series has an occurrence to come, that task stays (finished or not), so the key
 * still finds the series and repeating its create still answers the same series.
 */
import type mysql from 'mysql2/promise';
import type { Database } from '../db/connection.js';

export type FinishedStatus = 'done' | 'cancelled' | 'skipped' | 'failed';

const SQL_SELECT_EXPIRED = `SELECT id FROM tasks
  WHERE status = ? AND finished_at < ?
    AND NOT (cron IS NOT NULL AND series_id IS NULL
      AND EXISTS (SELECT 1 FROM tasks occurrence WHERE occurrence.series_id = tasks.id AND occurrence.status IN ('pending', 'running')))
  LIMIT ?`;

const SQL_DELETE_EXPIRED = 'DELETE FROM tasks WHERE id IN (?) AND status = ? AND finished_at < ?';

/** Ids of up to `limit` tasks in `status` that finished before `before` (epoch ms). */
export async function selectExpired(database: Database, status: FinishedStatus, before: number, limit: number): Promise<number[]> {
  const [rows] = await database.withConnection((conn) =>
    conn.query<mysql.RowDataPacket[]>(SQL_SELECT_EXPIRED, [status, new Date(before), limit]),
  );
  return rows.map((row) => Number(row.id));
}

/** Deletes those of `ids` still in `status` and finished before `before`; answers how many went. */
export async function deleteExpired(database: Database, ids: number[], status: FinishedStatus, before: number): Promise<number> {
  if (ids.length === 0) return 0;
  const [result] = await database.withConnection((conn) =>
    conn.query<mysql.ResultSetHeader>(SQL_DELETE_EXPIRED, [ids, status, new Date(before)]),
  );
  return result.affectedRows;
}
