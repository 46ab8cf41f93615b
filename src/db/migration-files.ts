/**
 * The migrations in drizzle/ as the migrator runs them: drizzle-kit's journal (each file's tag and
 * instant, in order), each file cut at its `--> statement-breakpoint` lines, every statement read
 * by migration-guard.ts (a form it cannot make safe to meet twice stops the read, naming it). On
 * MySQL 8 the statements name MySQL's binary NO PAD collation where the files name MariaDB's.
 * A migration is recorded in punctual_migrations as drizzle's migrator records it (the file's
 * sha256 and the journal's instant), so databases migrated by earlier releases read the same.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EXACT_COLLATION } from './schema.js';
import { parseMigrationStatement, type MigrationStatement } from './migration-guard.js';

/** drizzle/ sits two levels above this file both in src/db and in dist/db. */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../drizzle', import.meta.url));
export const MIGRATIONS_TABLE = 'punctual_migrations';

/** MySQL 8's name for a binary NO PAD utf8mb4 collation (MariaDB's is EXACT_COLLATION). */
export const MYSQL_EXACT_COLLATION = 'utf8mb4_0900_bin';

/** The binary NO PAD collation's name on the server that answered `version` to SELECT VERSION(). */
export function exactCollationFor(version: string): string {
  return /mariadb/i.test(version) ? EXACT_COLLATION : MYSQL_EXACT_COLLATION;
}

/** drizzle's journal: each migration's file (`tag`) and instant (`when`, what it records as `created_at` once applied). */
export function migrationJournal(folder = MIGRATIONS_FOLDER): { when: number; tag: string }[] {
  return (JSON.parse(readFileSync(join(folder, 'meta', '_journal.json'), 'utf8')) as { entries: { when: number; tag: string }[] }).entries;
}

/** The instant of the newest migration: a database that recorded it needs nothing. */
export function newestMigration(folder = MIGRATIONS_FOLDER): number {
  return Math.max(0, ...migrationJournal(folder).map((entry) => entry.when));
}

export interface Migration {
  /** The file's name without `.sql`, e.g. `0013_task_group`. */
  tag: string;
  /** The journal's instant, recorded as `created_at`. */
  when: number;
  hash: string;
  /** Each statement's text, as it runs on this server. */
  statements: string[];
  /** Each statement read for its guard. */
  parsed: MigrationStatement[];
}

const BREAKPOINT = '--> statement-breakpoint';

/** Every migration of `folder`, in order, as `version`'s server runs them. */
export function readMigrations(version: string, folder = MIGRATIONS_FOLDER): Migration[] {
  const collation = exactCollationFor(version);
  return migrationJournal(folder).map(({ tag, when }) => {
    let text = readFileSync(join(folder, `${tag}.sql`), 'utf8');
    if (collation !== EXACT_COLLATION) text = text.replaceAll(EXACT_COLLATION, collation);
    const statements = text
      .split(BREAKPOINT)
      .map((statement) => statement.trim())
      .filter((statement) => statement.replace(/^\s*--.*$/gm, '').trim() !== '');
    const parsed = statements.map((statement, index) => {
      try {
        return parseMigrationStatement(statement);
      } catch (error) {
        throw new Error(`${tag}.sql, statement ${index + 1}: ${(error as Error).message}`, { cause: error });
      }
    });
    return { tag, when, hash: createHash('sha256').update(text).digest('hex'), statements, parsed };
  });
}
