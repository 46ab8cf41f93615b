/**
 * A database's schema as sorted lines (tables and views, columns, indexes, foreign keys), read
 * from information_schema: two databases migrated different ways must read the same.
 */
import type mysql from 'mysql2/promise';

type Rows = mysql.RowDataPacket[];

export async function schemaSnapshot(conn: Pick<mysql.Connection, 'query'>, database: string): Promise<string[]> {
  const lines: string[] = [];
  const [tables] = await conn.query<Rows>(
    "SELECT TABLE_NAME AS t, TABLE_TYPE AS k FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME <> 'punctual_migration_turn'",
    [database],
  );
  for (const row of tables) lines.push(`table ${row.t} ${row.k}`);
  const [columns] = await conn.query<Rows>(
    `SELECT TABLE_NAME AS t, COLUMN_NAME AS c, ORDINAL_POSITION AS p, COLUMN_TYPE AS type, IS_NULLABLE AS n, COLUMN_DEFAULT AS d,
            COLLATION_NAME AS coll, EXTRA AS x, GENERATION_EXPRESSION AS g
       FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME <> 'punctual_migration_turn'`,
    [database],
  );
  for (const row of columns)
    lines.push(`column ${row.t}.${row.c} #${row.p} ${row.type} null=${row.n} default=${row.d} ${row.coll} ${row.x} ${row.g ?? ''}`);
  const [indexes] = await conn.query<Rows>(
    `SELECT TABLE_NAME AS t, INDEX_NAME AS i, NON_UNIQUE AS u, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) AS cols
       FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME <> 'punctual_migration_turn' GROUP BY TABLE_NAME, INDEX_NAME, NON_UNIQUE`,
    [database],
  );
  for (const row of indexes) lines.push(`index ${row.t}.${row.i} unique=${Number(row.u) === 0} (${row.cols})`);
  const [keys] = await conn.query<Rows>(
    `SELECT TABLE_NAME AS t, CONSTRAINT_NAME AS c, REFERENCED_TABLE_NAME AS r, DELETE_RULE AS d
       FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ?`,
    [database],
  );
  for (const row of keys) lines.push(`foreign key ${row.t}.${row.c} → ${row.r} on delete ${row.d}`);
  return lines.sort();
}
