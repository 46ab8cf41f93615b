/** The TypeScript client carries the flow controls: priority, replace and debounce, expiry, spread. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PunctualClient, PunctualError } from '../../clients/ts/src/client.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { spreadOffset } from '../../src/time/spread.js';

const TOKEN = 'client-flow-token-0123456789';
let db: TestDatabase;
let service: TestService;
let client: PunctualClient;

beforeAll(async () => {
  db = await createTestDatabase('client_flow');
  service = await startTestService(db, { API_TOKEN: TOKEN, PORT: '0' }, { boot: false });
  client = new PunctualClient({ baseUrl: await service.start(), token: TOKEN });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

describe('the TypeScript client', () => {
  it('creates with priority, expiry and spread, and replaces under a key with a ceiling', async () => {
    const at = Date.parse('2030-11-11T00:00:00.000Z');
    const { task, created } = await client.create({
      type: 'close_order',
      payload: { orderSn: 'TS1' },
      runAt: at,
      key: 'ts:1',
      priority: 5,
      expireAfterMs: 600_000,
      spreadMs: 30_000,
    });
    expect(created).toBe(true);
    expect(task).toMatchObject({ priority: 5, expireAfterMs: 600_000 });
    expect(Date.parse(task.runAt)).toBe(at + spreadOffset('ts:1', 30_000));
    const replaced = await client.create({
      type: 'close_order',
      payload: { orderSn: 'TS1-new' },
      runAt: at + 86_400_000,
      key: 'ts:1',
      onKeyConflict: 'replace',
      maxDelayMs: 60_000,
    });
    expect(replaced.created).toBe(false);
    expect(replaced.task).toMatchObject({ id: task.id, payload: { orderSn: 'TS1-new' }, priority: 0 });
    expect(Date.parse(replaced.task.runAt)).toBe(Date.parse(task.runAt) + 60_000);
    // Without replace, other content is still a conflict.
    const conflict = await client
      .create({ type: 'close_order', payload: { orderSn: 'other' }, runAt: at, key: 'ts:1' })
      .catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(PunctualError);
    expect((conflict as PunctualError).status).toBe(409);
  });
});
