/**
 * The fleet's model test (test/helpers/fleet-model.ts): three punctual processes with
 * SHARDING=on on one MariaDB/MySQL database, random operations through random processes, every
 * effect held against the model. A bounded number of seeds here (FLEET_RUNS, default 6, the regressions among them); many
 * more with `npm run soak:fleet`. A failing run prints the command that replays it.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { SERVER_URL } from '../helpers/db.js';
import { FleetModel } from '../helpers/fleet-model.js';
import { checkFleet } from '../helpers/fleet-model-seeds.js';

const server = new URL(SERVER_URL);
const model = new FleetModel({
  label: 'fleet_model',
  urlFor: (name) => `${SERVER_URL.replace(/\/$/, '')}/${name}`,
  servers: [`${server.hostname}:${server.port || 3306}`],
});

beforeAll(() => model.setUp(), 120_000);
afterAll(() => model.tearDown(), 120_000);

describe('the fleet against its model', () => {
  it('keeps every rule through random operations on three processes', async () => {
    await checkFleet(model, 'test/process/fleet-model.test.ts');
  }, 1_800_000);
});
