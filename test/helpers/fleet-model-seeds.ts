/**
 * The fleet model test's runs: how many and from which seed (FLEET_RUNS, FLEET_SEED, FLEET_PATH
 * to replay one), and the regression examples, each a sequence of operations that once broke a
 * rule, run first every time.
 */
import fc from 'fast-check';
import { type FleetModel, type Op, opsArbitrary } from './fleet-model.js';

/**
 * Operations that once broke a rule, run first every time. The first is the finding the model test
 * was built around: a pause through one process, creates of the paused type through the others
 * while held, a limit and a resume (held tasks stranded, fixed by `returned` and the sweep in
 * src/dispatch/limits.ts). The second is what it found itself on the Galera cluster.
 */
export const REGRESSIONS: Op[][] = [
  [
    { kind: 'pause', type: 'webhook', via: 0 },
    { kind: 'wait', ms: 700 },
    { kind: 'wait', ms: 700 },
    ...Array.from({ length: 30 }, (_, n): Op => ({
      kind: 'create',
      type: 'webhook',
      due: 'now',
      via: 1 + (n % 2),
      group: 'a',
      keyed: false,
    })),
    ...Array.from({ length: 4 }, (): Op => ({ kind: 'wait', ms: 700 })),
    { kind: 'limits', maxConcurrency: 2, ratePerSecond: null, groupBy: null, via: 0 },
    { kind: 'resume', type: 'webhook', via: 0 },
    { kind: 'wait', ms: 700 },
  ],
  // A restart (its start ran CREATE DATABASE IF NOT EXISTS, DDL that Galera applies on every node
  // at once) among bursts through each process, then every connection lost: on the cluster,
  // creates answered ids that were not their rows' ("gone from the table"; src/store/intake.ts),
  // and acks cut by the lost connections were refused, their tasks run again (allowed, as said).
  [
    { kind: 'burst', type: 'fleet_pull', due: 'soon', count: 9, group: 'b' },
    { kind: 'kill', via: 1 },
    { kind: 'burst', type: 'fleet_pull', due: 'now', count: 6, group: 'a' },
    { kind: 'lose-connections' },
    { kind: 'wait', ms: 495 },
    { kind: 'burst', type: 'fleet_pull', due: 'later', count: 3, group: 'a' },
  ],
];

/** fast-check's parameters: FLEET_RUNS runs (else `runs`) from FLEET_SEED (else a new seed), the regressions first. */
export function fleetModelParameters(file: string, examples: Op[][], runs = 6): fc.Parameters<[Op[]]> {
  const seed = process.env.FLEET_SEED === undefined ? Date.now() % 2 ** 31 : Number(process.env.FLEET_SEED);
  const path = process.env.FLEET_PATH;
  const numRuns = Number(process.env.FLEET_RUNS ?? runs);
  console.log(`fleet model: seed ${seed}, ${numRuns} runs${path === undefined ? '' : `, path ${path}`}`);
  return {
    seed,
    numRuns,
    // The examples count in fast-check's path, so a replay runs them too (shrinking is off: a run takes seconds).
    examples: examples.map((ops) => [ops] as [Op[]]),
    ...(path === undefined ? {} : { path }),
    endOnFailure: true,
    reporter(details) {
      if (!details.failed) return;
      const ops = details.counterexample?.[0];
      throw new Error(
        `a fleet model run broke a rule: ${String(details.errorInstance instanceof Error ? details.errorInstance.message : details.errorInstance)}\n` +
          `operations: ${JSON.stringify(ops)}\n` +
          `replay it: FLEET_SEED=${details.seed} FLEET_PATH=${details.counterexamplePath} npx vitest run ${file}\n` +
          `or run these operations again (timing differs from run to run): FLEET_OPS='${JSON.stringify(ops)}' FLEET_RUNS=5 npx vitest run ${file}`,
      );
    },
  };
}

/**
 * The model test itself, for both fleets: FLEET_OPS (a JSON list of operations, as a failing run
 * prints it) runs those operations FLEET_RUNS times (default 5), since a finding that hangs on
 * timing may need a few; else fast-check draws them.
 */
export async function checkFleet(model: FleetModel, file: string, runs?: number): Promise<void> {
  const given = process.env.FLEET_OPS;
  if (given !== undefined) {
    const ops = JSON.parse(given) as Op[];
    const times = Number(process.env.FLEET_RUNS ?? 5);
    for (let i = 0; i < times; i++) await model.run(ops);
    return;
  }
  await fc.assert(
    fc.asyncProperty(opsArbitrary, (ops) => model.run(ops)),
    fleetModelParameters(file, REGRESSIONS, runs),
  );
}
