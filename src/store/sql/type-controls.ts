/**
 * Every statement about the punctual_type_controls table: a type's pause and limits, one row per type
 * that has any (store/type-controls.ts runs them). Times come back as epoch milliseconds
 * computed by the server (rows.ts), as in the tasks catalogue.
 */
import { ms } from '../rows.js';

const COLUMNS = `type, paused, max_concurrency, rate_per_second, group_by, ${ms('updated_at')}`;

export const TYPE_CONTROLS = {
  all: `SELECT ${COLUMNS} FROM punctual_type_controls ORDER BY type`,
  /** Pause or resume a type, its limits kept (or none, for a new row). */
  setPaused: `INSERT INTO punctual_type_controls (type, paused, updated_at) VALUES (?, ?, ?)
    ON DUPLICATE KEY UPDATE paused = VALUES(paused), updated_at = VALUES(updated_at)`,
  /** A type's limits, all three written (the caller merged the change), its pause kept. */
  setLimits: `INSERT INTO punctual_type_controls (type, max_concurrency, rate_per_second, group_by, updated_at) VALUES (?, ?, ?, ?, ?)
    ON DUPLICATE KEY UPDATE max_concurrency = VALUES(max_concurrency), rate_per_second = VALUES(rate_per_second),
      group_by = VALUES(group_by), updated_at = VALUES(updated_at)`,
  /**
   * What every process polls to learn of another's change within a second: a digest of every row
   * (a handful of rows, one per controlled type), so any change of any field moves it, whatever
   * the clocks of the processes that wrote updated_at.
   */
  signature: `SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', type, paused, IFNULL(max_concurrency, '-'),
    IFNULL(rate_per_second, '-'), IFNULL(group_by, '-'), updated_at))), 0) FROM punctual_type_controls`,
  /** One type's row, locked: a change of its limits merges into what is stored. */
  lockOne: `SELECT ${COLUMNS} FROM punctual_type_controls WHERE type = ? FOR UPDATE`,
} as const;
