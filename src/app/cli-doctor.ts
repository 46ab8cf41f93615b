/**
 * `punctual doctor`: what punctual needs from its database, checked one line each: it answers,
 * its version, its time-zone tables (naive times are read in IANA zones by punctual itself, but a
 * shop's SQL with CONVERT_TZ needs them), its clock against this machine's, the grants punctual's
 * runs need and those its migrations need (against the migrations pending), close_order's tables
 * and columns as CLOSE_ORDER maps them, each of PROCEDURES and its EXECUTE grant, and on Galera `evs.suspect_timeout` against LEASE_MS (a node must be
 * declared gone well before a shard lease runs out, or a partitioned owner's shards wait).
 */
import type mysql from 'mysql2/promise';
import { freshConnections } from '../db/connection.js';
import { autocommit } from '../db/transaction.js';
import { migrationStatus } from '../db/migrate.js';
import { schemaOrGrantError } from '../db/errors.js';
import { closeOrderStatements, DEFAULT_CLOSE_ORDER, quoted, type CloseOrderMapping } from '../handlers/close-order.js';
import type { ProcedureEntry } from '../handlers/procedure.js';
import type { Config } from './config.js';

export interface Check {
  name: string;
  ok: boolean;
  /** ok but worth a look. */
  warn?: boolean;
  says: string;
}

/** What the user the service runs as needs on its database: reads and writes, no DDL. */
export const RUN_GRANTS = ['SELECT', 'INSERT', 'UPDATE', 'DELETE'] as const;
/**
 * What the user that migrates needs besides: tables, columns and indexes (REFERENCES for MySQL 8's
 * foreign keys), and, on a database 0.1.0 migrated, the views of 0020 made again by later
 * migrations (CREATE OR REPLACE VIEW needs DROP).
 */
export const MIGRATE_GRANTS = [...RUN_GRANTS, 'CREATE', 'ALTER', 'INDEX', 'REFERENCES', 'CREATE VIEW', 'DROP'] as const;

/** Which privileges the `SHOW GRANTS` lines give on `database` (or everywhere). */
export function grantedOf(lines: readonly string[], database: string): Set<string> {
  const granted = new Set<string>();
  for (const line of lines) {
    const match = /^GRANT (.+?) ON (\S+) TO /i.exec(line);
    if (match === null) continue;
    const on = match[2]!.replace(/`/g, '');
    if (on !== '*.*' && on !== `${database}.*`) continue;
    const privileges = match[1]!
      .toUpperCase()
      .split(',')
      .map((p) => p.trim());
    if (privileges.includes('ALL PRIVILEGES') || privileges.includes('ALL')) for (const p of MIGRATE_GRANTS) granted.add(p);
    for (const p of privileges) granted.add(p);
  }
  return granted;
}

/** The grants checks: what the user may do, against what running and migrating need (`pending`: migrations not yet applied). */
export function grantChecks(granted: ReadonlySet<string>, database: string, pending: readonly string[]): Check[] {
  const missingToRun = RUN_GRANTS.filter((privilege) => !granted.has(privilege));
  const missingToMigrate = MIGRATE_GRANTS.filter((privilege) => !granted.has(privilege));
  const migrateWith = `run \`punctual migrate\` as a user with ${MIGRATE_GRANTS.join(', ')} on ${database}`;
  return [
    {
      name: 'grants to run',
      ok: missingToRun.length === 0,
      says: missingToRun.length === 0 ? `${RUN_GRANTS.join(', ')} on ${database}` : `missing on ${database}: ${missingToRun.join(', ')}`,
    },
    {
      name: 'migrations',
      ok: pending.length === 0 || missingToMigrate.length === 0,
      warn: pending.length > 0,
      says:
        pending.length === 0
          ? `up to date${missingToMigrate.length === 0 ? '' : `; this user cannot migrate (missing ${missingToMigrate.join(', ')}): for the next release's, ${migrateWith}`}`
          : missingToMigrate.length === 0
            ? `${pending.length} pending (${pending.join(', ')}): the next start, or \`punctual migrate\`, applies them`
            : `${pending.length} pending (${pending.join(', ')}) and this user cannot apply them (missing ${missingToMigrate.join(', ')}): ${migrateWith}`,
    },
  ];
}

/** `evs.suspect_timeout = PT5S` in wsrep_provider_options, in ms; undefined when absent. */
export function suspectTimeoutMs(providerOptions: string): number | undefined {
  const match = /evs\.suspect_timeout\s*=\s*PT(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?/i.exec(providerOptions);
  if (match === null) return undefined;
  const [h, m, s] = [match[1], match[2], match[3]].map((part) => Number(part ?? 0));
  return Math.round(((h ?? 0) * 3600 + (m ?? 0) * 60 + (s ?? 0)) * 1000);
}

type Rows = mysql.RowDataPacket[];

/** The database's clock against this machine's, offset in ms (positive: the database is ahead), in words. */
export function clockSays(offset: number): string {
  if (offset === 0) return "the database's clock reads the same as this machine's";
  return `the database's clock is ${Math.abs(offset)} ms ${offset > 0 ? 'ahead of' : 'behind'} this machine's`;
}

/**
 * close_order's statements on the tables CLOSE_ORDER maps, run so that they touch no row (WHERE
 * 1 = 0, in a transaction rolled back): the server answers for the tables, the columns and the
 * grants exactly as it will at a run. Unset, CLOSE_ORDER names the write-ups' tables, which a shop
 * that does not use close_order lacks: then a warning, and a failure only when it was set.
 */
async function closeOrderCheck(conn: mysql.Connection, database: string, mapping: CloseOrderMapping): Promise<Check> {
  const configured = JSON.stringify(mapping) !== JSON.stringify(DEFAULT_CLOSE_ORDER);
  const sql = closeOrderStatements(mapping);
  const tables = mapping.stock === null ? quoted(mapping.table) : `${quoted(mapping.table)} and ${quoted(mapping.stock.goods)}`;
  try {
    await conn.query(`USE ${quoted(database)}`);
    await conn.query('START TRANSACTION');
    try {
      await conn.query(sql.lockOrders.replace('IN (?)', 'IN (NULL) AND 1 = 0'));
      await conn.query(sql.close.replace('IN (?)', 'IN (NULL) AND 1 = 0'), [mapping.closed]);
      if (mapping.stock !== null) await conn.query(sql.putBack(1).replace('IN (?)', 'IN (NULL) AND 1 = 0'), [0, 0]);
    } finally {
      await conn.query('ROLLBACK');
    }
    return { name: 'close_order', ok: true, says: `${tables}: the columns and grants close_order uses are there` };
  } catch (error) {
    const problem = schemaOrGrantError(error) ?? (error as Error).message;
    return {
      name: 'close_order',
      ok: !configured,
      warn: true,
      says: `${problem}: ${configured ? 'fix CLOSE_ORDER or the grants' : "close_order would fail on this database: set CLOSE_ORDER to the shop's tables if it uses close_order"} (docs/handlers.md#close_order)`,
    };
  }
}

/** A PROCEDURES entry: the procedure exists, and this user may EXECUTE it. */
async function procedureCheck(conn: mysql.Connection, database: string, entry: ProcedureEntry, grants: readonly string[]): Promise<Check> {
  const schema = entry.schema ?? database;
  const name = `procedure ${entry.type}`;
  const [found] = await conn.query<Rows>(
    "SELECT 1 FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ? AND ROUTINE_NAME = ? AND ROUTINE_TYPE = 'PROCEDURE'",
    [schema, entry.name],
  );
  const executes = grants.some((line) => {
    const match = /^GRANT (.+?) ON (?:PROCEDURE )?(\S+) TO /i.exec(line);
    if (match === null) return false;
    const on = match[2]!.replace(/`/g, '');
    const privileges = match[1]!.toUpperCase();
    return (
      (on === '*.*' || on === `${schema}.*` || on === `${schema}.${entry.name}`) && /\b(EXECUTE|ALL PRIVILEGES|ALL)\b/.test(privileges)
    );
  });
  if (found.length === 0)
    return { name, ok: false, says: `${schema}.${entry.name} does not exist, or this user may not see it (PROCEDURES)` };
  if (!executes) return { name, ok: false, says: `${schema}.${entry.name}: this user lacks EXECUTE on it` };
  return { name, ok: true, says: `${schema}.${entry.name}: found, with EXECUTE` };
}

export async function doctor(config: Config, now: () => number = Date.now): Promise<Check[]> {
  const { url, name } = config.database;
  const checks: Check[] = [];
  try {
    // Without the database in the path: it may not be created yet (punctual creates it at start).
    await autocommit(freshConnections(url, { timezone: 'Z', dateStrings: true }, '/', config.database), async (conn) => {
      const before = now();
      const [[server]] = await conn.query<Rows>('SELECT VERSION() AS version, UTC_TIMESTAMP(3) AS utc');
      const after = now();
      checks.push({ name: 'database', ok: true, says: `answers (${String(server?.version)})` });
      const version = String(server?.version);
      const maria = /mariadb/i.exec(version) !== null;
      const [major = 0, minor = 0] = version.split(/[.-]/).map(Number);
      const supported = maria ? major > 10 || (major === 10 && minor >= 6) : major >= 8;
      checks.push({
        name: 'version',
        ok: supported,
        says: supported
          ? `${maria ? 'MariaDB' : 'MySQL'} ${major}.${minor}: supported`
          : `${version}: punctual needs MySQL 8 or MariaDB 10.6+`,
      });
      const [[zone]] = await conn.query<Rows>("SELECT CONVERT_TZ('2026-01-01 00:00:00', 'UTC', 'Asia/Shanghai') AS shanghai");
      const zones = zone?.shanghai !== null && zone?.shanghai !== undefined;
      checks.push({
        name: 'time-zone tables',
        ok: true,
        warn: !zones,
        says: zones
          ? 'loaded (CONVERT_TZ knows Asia/Shanghai)'
          : 'empty: punctual does not need them (it reads zones itself), but SQL of yours with CONVERT_TZ and zone names gets NULL; load them with mariadb-tzinfo-to-sql /usr/share/zoneinfo | mariadb mysql',
      });
      const serverMs = Date.parse(`${String(server?.utc).replace(' ', 'T')}Z`);
      const offset = Math.round(serverMs - (before + after) / 2);
      const close = Math.abs(offset) <= 100 + (after - before) / 2;
      checks.push({
        name: 'clock',
        ok: true,
        warn: !close,
        says: `${clockSays(offset)} (round trip ${after - before} ms)${close ? '' : ': over 100 ms; run NTP on both'}`,
      });
      const [grants] = await conn.query<Rows>('SHOW GRANTS');
      const granted = grantedOf(
        grants.map((row) => String(Object.values(row)[0])),
        name,
      );
      const { migrations } = await migrationStatus(url, name, config.database);
      checks.push(
        ...grantChecks(
          granted,
          name,
          migrations.filter((migration) => !migration.applied).map((migration) => migration.tag),
        ),
      );
      checks.push(await closeOrderCheck(conn, name, config.handlers.closeOrder));
      const grantLines = grants.map((row) => String(Object.values(row)[0]));
      for (const procedure of config.handlers.procedures) checks.push(await procedureCheck(conn, name, procedure, grantLines));
      const [wsrep] = await conn.query<Rows>("SHOW GLOBAL VARIABLES LIKE 'wsrep_provider_options'");
      const [size] = await conn.query<Rows>("SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'");
      const clusterSize = Number(size[0]?.Value ?? 0);
      if (clusterSize === 0) {
        checks.push({ name: 'galera', ok: true, says: 'not a Galera node' });
      } else {
        const suspect = suspectTimeoutMs(String(wsrep[0]?.Value ?? ''));
        const leaseMs = config.cluster.leaseMs;
        const fits = suspect !== undefined && suspect < leaseMs;
        checks.push({
          name: 'galera',
          ok: fits || !config.cluster.sharding,
          warn: !fits,
          says:
            `${clusterSize} nodes; evs.suspect_timeout ${suspect ?? '?'} ms, LEASE_MS ${leaseMs}` +
            (fits
              ? ': a lost node is declared gone before a lease runs out'
              : ': raise LEASE_MS above evs.suspect_timeout, or a partitioned owner holds its shards until Galera gives up on it'),
        });
      }
    });
  } catch (error) {
    checks.push({ name: 'database', ok: false, says: `does not answer: ${(error as Error).message}` });
  }
  return checks;
}
