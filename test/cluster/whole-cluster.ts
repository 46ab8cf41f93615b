/**
 * Runs before each cluster test file: the file starts on a whole cluster. A file before it may
 * have left a node down (a kill whose restart failed, a node that stopped under load) or out of
 * sync (a donor whose state transfer hung, holding every write through it); without this, every
 * later file failed on that one node. `scripts/cluster.sh status` counts either as not whole;
 * `up` rejoins the node out of sync and starts the nodes that are down; when the cluster cannot
 * be made whole so, it is made anew.
 */
import { execFileSync } from 'node:child_process';
import { beforeAll } from 'vitest';

function cluster(...args: string[]): string {
  return execFileSync('scripts/cluster.sh', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

beforeAll(() => {
  try {
    cluster('status');
    return;
  } catch (error) {
    console.warn(`[cluster] not whole before this file:\n${String((error as { stdout?: string }).stdout ?? '').trim()}`);
  }
  try {
    cluster('up');
  } catch {
    console.warn('[cluster] the nodes that were down did not rejoin: the cluster is made anew');
    cluster('down');
    cluster('up');
  }
}, 600_000);
