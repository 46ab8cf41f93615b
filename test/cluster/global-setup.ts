/**
 * Brings the three-node Galera cluster up (scripts/cluster.sh up: nothing to do when it runs
 * already), builds dist/ for the real processes, and takes the cluster down at the end when this
 * run started it.
 */
import { execFileSync } from 'node:child_process';

function cluster(...args: string[]): string {
  return execFileSync('scripts/cluster.sh', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

export default function setup(): () => void {
  // A cluster that runs, even with a node down, is reused and left running.
  let running: boolean;
  try {
    cluster('status');
    running = true;
  } catch (error) {
    running = !String((error as { stdout?: string }).stdout ?? '').includes('not running');
  }
  const started = Date.now();
  let url: string | undefined;
  try {
    url = cluster('up').trim().split('\n').pop();
  } catch (error) {
    // A node that did not join leaves the others running: what this run started, it takes down.
    if (!running) cluster('down');
    throw error;
  }
  if (!running) console.log(`cluster up in ${Date.now() - started} ms: ${url}`);
  execFileSync('npm', ['run', 'build', '--silent'], { stdio: 'inherit' });
  return () => {
    if (!running) cluster('down');
  };
}
