/**
 * `punctual doctor`: what punctual needs from its database, checked one line each: it answers,
 * its version, its time-zone tables (naive times are read in IANA zones by punctual itself, but a
 * shop's SQL with CONVERT_TZ needs them), its clock against this machine's, the grants punctual's
 * migrations and runs need, and on Galera `evs.suspect_timeout` against LEASE_MS (a node must be
 * declared gone well before a shard lease runs out, or a partitioned owner's shards wait).
 */
import type mysql from 'mysql2/promise';
import { freshConnections } from '../db/connection.js';
import { autocommit } from '../db/transaction.js';
import type { Config } from './config.js';

export interface Check {
  name: string;
  ok: boolean;
  /** ok but worth a look. */
  warn?: boolean;
  says: string;
}

/**
 * The privileges punctual's migrations and runs use on its database. CREATE VIEW: migration 0020
 * makes the `punctual_*` views over the tables of a database 0.1.0 migrated.
 */
export const NEEDED_GRANTS = ['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'CREATE', 'ALTER', 'INDEX', 'REFERENCES', 'CREATE VIEW'] as const;

/** Which of NEEDED_GRANTS the `SHOW GRANTS` lines give on `database` (or everywhere). */
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
    if (privileges.includes('ALL PRIVILEGES') || privileges.includes('ALL')) for (const p of NEEDED_GRANTS) granted.add(p);
    for (const p of privileges) granted.add(p);
  }
  return granted;
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
      const missing = NEEDED_GRANTS.filter((privilege) => !granted.has(privilege));
      checks.push({
        name: 'grants',
        ok: missing.length === 0,
        says: missing.length === 0 ? `${NEEDED_GRANTS.join(', ')} on ${name}` : `missing on ${name}: ${missing.join(', ')}`,
      });
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
