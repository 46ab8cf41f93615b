/** A connection that stops answering without a reset (a black hole) holds nothing up for long. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/db/connection.js';
import { TaskStore } from '../../src/store/task-store.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { Proxy } from '../helpers/proxy.js';
import { report } from './scale.js';

let db: TestDatabase;
let proxy: Proxy;

beforeAll(async () => {
  db = await createTestDatabase('stall');
  proxy = await new Proxy().start();
});

afterAll(async () => {
  await proxy?.stop();
  await db?.drop();
});

describe('a black-holed connection', () => {
  it('is dropped at its deadline, and the next statement runs on a fresh connection', async () => {
    const database = new Database({ url: proxy.url(db.name), poolSize: 3, lockWaitTimeoutS: 1, deadlineMs: 800 });
    const store = new TaskStore(database);
    try {
      expect(await store.reads.maxId()).toBe(0);
      const swallowed = proxy.stallAll();
      const started = Date.now();
      const stuck = await store.reads.maxId().then(
        () => 'answered',
        (error: { code?: string; message: string }) => error,
      );
      const waited = Date.now() - started;
      expect(stuck).toMatchObject({ code: 'PROTOCOL_SEQUENCE_TIMEOUT' });
      const again = Date.now();
      expect(await store.reads.maxId()).toBe(0);
      report('black hole', {
        'connections swallowed': swallowed,
        'statement gave up after ms': waited,
        'next statement ms': Date.now() - again,
      });
      expect(waited).toBeGreaterThanOrEqual(800);
      expect(waited).toBeLessThan(3000);
    } finally {
      await Promise.race([database.close(), new Promise((resolve) => setTimeout(resolve, 1000))]);
    }
  });
});
