/**
 * What makes a migration statement safe to meet a second time. MySQL's and MariaDB's DDL is not
 * transactional: a start killed between a statement and the record of its migration leaves the
 * statement done and the migration pending, and the next start runs the file again. So before each
 * statement runs, its effect is looked up in information_schema and only what is missing runs:
 * a CREATE TABLE whose table exists is skipped, an ALTER keeps the clauses whose effect is absent.
 * MariaDB 10.6+ and MySQL 8 apply one DDL statement atomically, so a statement is either done or
 * not; the clause-by-clause rule holds even where that is not so.
 *
 * The forms understood are those drizzle-kit writes for MySQL. A statement built at run time
 * (`SET @sql = IF(…)`, `PREPARE`, `EXECUTE`) carries its own guard in its SQL, and `UPDATE`/`DO`/
 * `CREATE OR REPLACE VIEW` are written to change nothing the second time; any other form is
 * refused when the file is read (docs/development.md#migrations-that-survive-a-kill), and
 * test/integration/migrate-kill.test.ts checks every statement of drizzle/ met twice.
 */
import type mysql from 'mysql2/promise';

/** What the guards read the schema through. */
export type SchemaReader = Pick<mysql.Connection, 'query'>;

/** One change of an ALTER TABLE, with its text as written. */
export type AlterClause =
  | { kind: 'add-column'; column: string; text: string }
  | { kind: 'add-index'; index: string; columns: string[]; text: string }
  | { kind: 'add-foreign-key'; constraint: string; text: string }
  | { kind: 'drop-index'; index: string; text: string }
  | { kind: 'drop-foreign-key'; constraint: string; text: string }
  | { kind: 'drop-column'; column: string; text: string }
  | { kind: 'modify-column'; column: string; type: string; collation: string | undefined; notNull: boolean; text: string }
  | { kind: 'rename-column'; from: string; to: string; text: string };

export type MigrationStatement =
  | { kind: 'create-table'; table: string; sql: string }
  | { kind: 'drop-table'; table: string; sql: string }
  | { kind: 'rename-table'; from: string; to: string; sql: string }
  | { kind: 'create-index'; table: string; index: string; columns: string[]; sql: string }
  | { kind: 'drop-index'; table: string; index: string; sql: string }
  | { kind: 'alter-table'; table: string; clauses: AlterClause[] }
  /** Guarded by its own SQL, or changes nothing the second time. */
  | { kind: 'rerunnable'; sql: string };

/** A statement of a form the migrator cannot make safe to meet twice. */
export class UnguardedStatement extends Error {
  override name = 'UnguardedStatement';
}

const NAME = '`([^`]+)`';
/** Statements that carry their own guard or repeat harmlessly. */
const RERUNNABLE = /^(SET|PREPARE|EXECUTE|DEALLOCATE|DO|UPDATE|CREATE\s+OR\s+REPLACE\s+(SQL\s+SECURITY\s+\w+\s+)?VIEW)\b/i;

/** The statement without its leading `--` comment lines, blank lines and final semicolon. */
export function statementText(raw: string): string {
  return raw
    .split('\n')
    .filter((line) => !/^\s*--/.test(line))
    .join('\n')
    .trim()
    .replace(/;\s*$/, '');
}

/** `a, b (c, d), 'e,f'` → the parts between top-level commas (outside parentheses, quotes and backticks). */
export function topLevelParts(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote: string | undefined;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const char = text[i]!;
    if (quote !== undefined) {
      if (char === quote) quote = undefined;
      continue;
    }
    if (char === "'" || char === '"' || char === '`') quote = char;
    else if (char === '(') depth++;
    else if (char === ')') depth--;
    else if (char === ',' && depth === 0) {
      parts.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push(text.slice(start).trim());
  return parts.filter((part) => part !== '');
}

/** `(`a`,`b`(10) DESC)` → ['a', 'b']. */
function indexColumns(list: string): string[] {
  const inner = list.trim().replace(/^\(/, '').replace(/\)$/, '');
  return topLevelParts(inner).map((part) => {
    const name = /^`([^`]+)`/.exec(part)?.[1];
    if (name === undefined) throw new UnguardedStatement(`an index column must be a plain column name: ${part}`);
    return name;
  });
}

function alterClause(text: string): AlterClause {
  let match: RegExpExecArray | null;
  if ((match = new RegExp(`^ADD\\s+CONSTRAINT\\s+${NAME}\\s+UNIQUE\\s*(?:INDEX\\s+|KEY\\s+)?(\\(.*\\))$`, 'is').exec(text)))
    return { kind: 'add-index', index: match[1]!, columns: indexColumns(match[2]!), text };
  if ((match = new RegExp(`^ADD\\s+CONSTRAINT\\s+${NAME}\\s+FOREIGN\\s+KEY\\b`, 'i').exec(text)))
    return { kind: 'add-foreign-key', constraint: match[1]!, text };
  if ((match = new RegExp(`^ADD\\s+(?:UNIQUE\\s+)?(?:INDEX|KEY)\\s+${NAME}\\s*(\\(.*\\))$`, 'is').exec(text)))
    return { kind: 'add-index', index: match[1]!, columns: indexColumns(match[2]!), text };
  if ((match = new RegExp(`^ADD\\s+(?:COLUMN\\s+)?${NAME}\\s`, 'i').exec(text))) return { kind: 'add-column', column: match[1]!, text };
  if ((match = new RegExp(`^DROP\\s+(?:INDEX|KEY)\\s+${NAME}$`, 'i').exec(text))) return { kind: 'drop-index', index: match[1]!, text };
  if ((match = new RegExp(`^DROP\\s+FOREIGN\\s+KEY\\s+${NAME}$`, 'i').exec(text)))
    return { kind: 'drop-foreign-key', constraint: match[1]!, text };
  if ((match = new RegExp(`^DROP\\s+(?:COLUMN\\s+)?${NAME}$`, 'i').exec(text))) return { kind: 'drop-column', column: match[1]!, text };
  if ((match = new RegExp(`^RENAME\\s+COLUMN\\s+${NAME}\\s+TO\\s+${NAME}$`, 'i').exec(text)))
    return { kind: 'rename-column', from: match[1]!, to: match[2]!, text };
  if ((match = new RegExp(`^MODIFY\\s+(?:COLUMN\\s+)?${NAME}\\s+(\\w+(?:\\([^)]*\\))?(?:\\s+unsigned)?)(.*)$`, 'is').exec(text))) {
    const rest = match[3]!;
    return {
      kind: 'modify-column',
      column: match[1]!,
      type: match[2]!.toLowerCase(),
      collation: /\bCOLLATE\s+(\w+)/i.exec(rest)?.[1],
      notNull: /\bNOT\s+NULL\b/i.test(rest),
      text,
    };
  }
  throw new UnguardedStatement(`an ALTER TABLE clause the migrator cannot guard: ${text}`);
}

/** Reads one statement of a migration file; throws UnguardedStatement for a form it cannot make safe to meet twice. */
export function parseMigrationStatement(raw: string): MigrationStatement {
  const sql = statementText(raw);
  let match: RegExpExecArray | null;
  if (RERUNNABLE.test(sql)) return { kind: 'rerunnable', sql };
  if ((match = new RegExp(`^CREATE\\s+TABLE\\s+(?:IF\\s+NOT\\s+EXISTS\\s+)?${NAME}`, 'i').exec(sql)))
    return { kind: 'create-table', table: match[1]!, sql };
  if ((match = new RegExp(`^DROP\\s+TABLE\\s+(?:IF\\s+EXISTS\\s+)?${NAME}$`, 'i').exec(sql)))
    return { kind: 'drop-table', table: match[1]!, sql };
  if ((match = new RegExp(`^RENAME\\s+TABLE\\s+${NAME}\\s+TO\\s+${NAME}$`, 'i').exec(sql)))
    return { kind: 'rename-table', from: match[1]!, to: match[2]!, sql };
  if ((match = new RegExp(`^CREATE\\s+(?:UNIQUE\\s+)?INDEX\\s+${NAME}\\s+ON\\s+${NAME}\\s*(\\(.*\\))$`, 'is').exec(sql)))
    return { kind: 'create-index', index: match[1]!, table: match[2]!, columns: indexColumns(match[3]!), sql };
  if ((match = new RegExp(`^DROP\\s+INDEX\\s+${NAME}\\s+ON\\s+${NAME}$`, 'i').exec(sql)))
    return { kind: 'drop-index', index: match[1]!, table: match[2]!, sql };
  if ((match = new RegExp(`^ALTER\\s+TABLE\\s+${NAME}\\s+(.*)$`, 'is').exec(sql)))
    return { kind: 'alter-table', table: match[1]!, clauses: topLevelParts(match[2]!).map(alterClause) };
  throw new UnguardedStatement(`a statement the migrator cannot make safe to run twice: ${sql.slice(0, 120)}`);
}

/** What information_schema says of one table, as far as the guards ask. */
export interface TableFacts {
  exists: boolean;
  columns: Map<string, { type: string; collation: string | null; nullable: boolean }>;
  /** Index name → its columns in order. */
  indexes: Map<string, string[]>;
  foreignKeys: Set<string>;
}

type Rows = mysql.RowDataPacket[];

/** The facts of `table` in the connection's database. */
export async function tableFacts(conn: SchemaReader, table: string): Promise<TableFacts> {
  const [tables] = await conn.query<Rows>('SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?', [
    table,
  ]);
  const facts: TableFacts = { exists: tables.length > 0, columns: new Map(), indexes: new Map(), foreignKeys: new Set() };
  if (!facts.exists) return facts;
  const [columns] = await conn.query<Rows>(
    `SELECT COLUMN_NAME AS name, COLUMN_TYPE AS type, COLLATION_NAME AS collation, IS_NULLABLE AS nullable
       FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`,
    [table],
  );
  for (const row of columns)
    facts.columns.set(String(row.name), {
      type: String(row.type).toLowerCase(),
      collation: row.collation === null ? null : String(row.collation),
      nullable: row.nullable === 'YES',
    });
  const [indexes] = await conn.query<Rows>(
    `SELECT INDEX_NAME AS name, COLUMN_NAME AS col FROM information_schema.STATISTICS
      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`,
    [table],
  );
  for (const row of indexes) {
    const name = String(row.name);
    facts.indexes.set(name, [...(facts.indexes.get(name) ?? []), String(row.col)]);
  }
  const [keys] = await conn.query<Rows>(
    `SELECT CONSTRAINT_NAME AS name FROM information_schema.TABLE_CONSTRAINTS
      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND CONSTRAINT_TYPE = 'FOREIGN KEY'`,
    [table],
  );
  for (const row of keys) facts.foreignKeys.add(String(row.name));
  return facts;
}

const sameColumns = (a: readonly string[] | undefined, b: readonly string[]) =>
  a !== undefined && a.length === b.length && a.every((column, i) => column.toLowerCase() === b[i]!.toLowerCase());

/** Whether `clause`'s effect is in `facts` already; `clauses` are its statement's, for an index dropped and added again. */
export function clauseApplied(clause: AlterClause, facts: TableFacts, clauses: readonly AlterClause[]): boolean {
  switch (clause.kind) {
    case 'add-column':
      return facts.columns.has(clause.column);
    case 'add-index': {
      const existing = facts.indexes.get(clause.index);
      if (existing === undefined) return false;
      if (sameColumns(existing, clause.columns)) return true;
      // Another definition under the name: applied only by a DROP of the same statement.
      if (clauses.some((other) => other.kind === 'drop-index' && other.index === clause.index)) return false;
      throw new UnguardedStatement(
        `index ${clause.index} exists on (${existing.join(', ')}), not on (${clause.columns.join(', ')}) as "${clause.text}" adds it`,
      );
    }
    case 'add-foreign-key':
      return facts.foreignKeys.has(clause.constraint);
    case 'drop-index': {
      // Dropped to be added again with another definition: done when the new one is there.
      const readded = clauses.find((other) => other.kind === 'add-index' && other.index === clause.index);
      if (readded !== undefined && facts.indexes.has(clause.index)) return clauseApplied(readded, facts, clauses);
      return !facts.indexes.has(clause.index);
    }
    case 'drop-foreign-key':
      return !facts.foreignKeys.has(clause.constraint);
    case 'drop-column':
      return !facts.columns.has(clause.column);
    case 'rename-column':
      return !facts.columns.has(clause.from) && facts.columns.has(clause.to);
    case 'modify-column': {
      const column = facts.columns.get(clause.column);
      if (column === undefined) return false;
      return (
        column.type === clause.type &&
        (clause.collation === undefined || column.collation === clause.collation) &&
        column.nullable === !clause.notNull
      );
    }
  }
}

async function tableExists(conn: SchemaReader, table: string): Promise<boolean> {
  return (await tableFacts(conn, table)).exists;
}

/**
 * The SQL that brings `statement`'s effect about on the connection's database now: the statement
 * itself, an ALTER cut to its clauses not yet applied, or undefined when the effect is there.
 */
export async function pendingSql(conn: SchemaReader, statement: MigrationStatement): Promise<string | undefined> {
  switch (statement.kind) {
    case 'rerunnable':
      return statement.sql;
    case 'create-table':
      return (await tableExists(conn, statement.table)) ? undefined : statement.sql;
    case 'drop-table':
      return (await tableExists(conn, statement.table)) ? statement.sql : undefined;
    case 'rename-table':
      return (await tableExists(conn, statement.from)) || !(await tableExists(conn, statement.to)) ? statement.sql : undefined;
    case 'create-index': {
      const clause: AlterClause = { kind: 'add-index', index: statement.index, columns: statement.columns, text: statement.sql };
      return clauseApplied(clause, await tableFacts(conn, statement.table), [clause]) ? undefined : statement.sql;
    }
    case 'drop-index':
      return (await tableFacts(conn, statement.table)).indexes.has(statement.index) ? statement.sql : undefined;
    case 'alter-table': {
      const facts = await tableFacts(conn, statement.table);
      const missing = statement.clauses.filter((clause) => !clauseApplied(clause, facts, statement.clauses));
      if (missing.length === 0) return undefined;
      return `ALTER TABLE \`${statement.table}\` ${missing.map((clause) => clause.text).join(', ')}`;
    }
  }
}
