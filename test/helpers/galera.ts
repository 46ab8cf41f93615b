/**
 * The three-node Galera cluster of scripts/cluster.sh, for test/cluster: its nodes, URLs that
 * start at a given node, its write conflicts, and killing and restarting a node.
 */
import { execFileSync } from 'node:child_process';
import mysql from 'mysql2/promise';
import { waitFor } from './server.js';

export const NODES = ['127.0.0.1:33061', '127.0.0.1:33062', '127.0.0.1:33063'];

/** The URL for a process that writes through node `first` (1..3), the others after it in turn. */
export function urlFrom(first: number, database: string): string {
  return `mysql://root@${[0, 1, 2].map((i) => NODES[(first - 1 + i) % 3]).join(',')}/${database}`;
}

async function onNode<T>(node: string, fn: (conn: mysql.Connection) => Promise<T>): Promise<T> {
  const [host, port] = node.split(':');
  const conn = await mysql.createConnection({ host, port: Number(port), user: 'root' });
  try {
    return await fn(conn);
  } finally {
    await conn.end();
  }
}

/** Write conflicts between nodes so far: certification failures and brute-force aborts, summed over the nodes up. */
export async function conflicts(): Promise<number> {
  let total = 0;
  for (const node of NODES) {
    const rows = await onNode(node, async (conn) => {
      const [found] = await conn.query<mysql.RowDataPacket[]>(
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')",
      );
      return found;
    }).catch(() => []);
    for (const row of rows) total += Number(row.Value);
  }
  return total;
}

/** The cluster size node `node` (host:port) sees. */
export function clusterSize(node: string): Promise<number> {
  return onNode(node, async (conn) => {
    const [rows] = await conn.query<mysql.RowDataPacket[]>("SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'");
    return Number(rows[0]?.Value);
  });
}

/** kill -9 node `n` (1..3); returns when its process is gone. */
export function killNode(n: number): void {
  execFileSync('scripts/cluster.sh', ['kill', String(n)], { stdio: 'ignore' });
}

/** Starts node `n` again and waits until it has rejoined and sees all three nodes. Returns the time taken. */
export async function restartNode(n: number): Promise<number> {
  const started = Date.now();
  // Its stderr (a node's error log when it cannot rejoin) goes to the test's output.
  execFileSync('scripts/cluster.sh', ['start', String(n)], { stdio: ['ignore', 'ignore', 'inherit'] });
  await waitFor(async () => (await clusterSize(NODES[n - 1]!)) === 3 || undefined, 120_000, `node ${n} to rejoin`);
  return Date.now() - started;
}
