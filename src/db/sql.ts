/**
 * The server-level statements: those about a session, a transaction or the server itself, not
 * about one of punctual's tables (those are in src/store/sql/, a file per table). Identifiers
 * go in through `??` and values through `?`, so mysql2 escapes both: nothing is pasted in.
 */
export const DB = {
  // ── sessions: every connection in UTC, whatever the server's default time_zone ────────────
  /** The pool's session: UTC, and how long a row lock is waited for (seconds). */
  poolSession: "SET time_zone = '+00:00', SESSION innodb_lock_wait_timeout = ?",
  /** No gap locks: the dispatcher's locking reads never collide with the shop's inserts. */
  readCommitted: 'SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED',
  utcSession: "SET time_zone = '+00:00'",

  // ── transactions (db/transaction.ts) ───────────────────────────────────────────────────────
  begin: 'BEGIN',
  commit: 'COMMIT',
  rollback: 'ROLLBACK',
  /** One database handler's run inside a batch's transaction: its writes undone alone when it throws. */
  savepoint: 'SAVEPOINT task',
  releaseSavepoint: 'RELEASE SAVEPOINT task',
  rollbackToSavepoint: 'ROLLBACK TO SAVEPOINT task',

  /**
   * MariaDB: fails (and so stops a multi-statement text before its COMMIT: pipeline.ts) unless the
   * statement just before it matched ? rows. The affected-rows check of a settle, made by the server.
   */
  expectRowCount:
    "BEGIN NOT ATOMIC IF ROW_COUNT() <> ? THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'punctual: a settle matched another number of rows than it expected'; END IF; END",

  // ── the server ─────────────────────────────────────────────────────────────────────────────
  ping: 'SELECT 1',
  /** Which server this is (the migrator picks the exact collation's name by it). */
  version: 'SELECT VERSION() AS version',
  /** A Galera node replicating (an empty answer where the server has no Galera in it). */
  wsrepOn: "SHOW GLOBAL VARIABLES LIKE 'wsrep_on'",
  /** What tells the ids of a multi-row INSERT (Database.insertIds). */
  insertIdTraits: 'SELECT VERSION() AS version, @@innodb_autoinc_lock_mode AS mode, @@auto_increment_increment AS step',
  /** Microseconds since the epoch by the server's clock, whatever the session's time_zone. */
  serverNowUs: "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS us",
  /** Ends a connection from the server side: its transaction rolls back, its locks go at once. */
  killConnection: 'KILL CONNECTION ?',
  databaseExists: 'SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?',
  createDatabase: 'CREATE DATABASE IF NOT EXISTS ?? CHARACTER SET utf8mb4',
  dropDatabase: 'DROP DATABASE IF EXISTS ??',
} as const;
