/**
 * The fleet's model test (test/helpers/fleet-model.ts) on the three-node Galera cluster: three
 * punctual processes with SHARDING=on, each writing through another node first; a lost
 * connection kills the fleet's connections on every node. A bounded number of seeds
 * (FLEET_RUNS, default 4, the regressions among them); a failing run prints the command that replays it.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { FleetModel } from '../helpers/fleet-model.js';
import { checkFleet } from '../helpers/fleet-model-seeds.js';
import { NODES, urlFrom } from '../helpers/galera.js';

const model = new FleetModel({
  label: 'galera_fleet_model',
  urlFor: (name, index) => urlFrom(index + 1, name),
  servers: NODES,
});

beforeAll(() => model.setUp(), 120_000);
afterAll(() => model.tearDown(), 120_000);

describe('the fleet against its model on a Galera cluster', () => {
  it('keeps every rule through random operations on three processes, one per node', async () => {
    await checkFleet(model, '--config vitest.cluster.config.ts test/cluster/fleet-model.test.ts', 4);
  }, 1_800_000);
});
