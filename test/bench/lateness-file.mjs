/**
 * How late each run of the lateness benchmark started (test/bench/peers.ts), written where the
 * bench reads it: every worker, punctual's handler module and each peer's, calls `record(i, due)`
 * first thing in its handler, and the lines (`<task number> <ms late>`) reach the file given in
 * BENCH_LATENESS_FILE 100 ms later at most, so writing them costs the run nothing measurable.
 */
import { appendFileSync } from 'node:fs';
import { setInterval } from 'node:timers';

const file = process.env.BENCH_LATENESS_FILE;
let lines = [];

/** Writes what was recorded since the last flush. */
export function flush() {
  if (file === undefined || lines.length === 0) return;
  appendFileSync(file, lines.join(''));
  lines = [];
}

setInterval(flush, 100).unref();
process.once('exit', flush);

/** Task `i`, due at epoch ms `due`, starts now. */
export function record(i, due) {
  lines.push(`${i} ${Date.now() - due}\n`);
}
