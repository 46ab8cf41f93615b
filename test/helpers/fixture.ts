/**
 * What most integration tests set up the same way: a database of the file's own, created before
 * its tests and dropped after them, and the service a test starts, stopped after that test. Call
 * it at the top of the file; its hooks run before the file's own `beforeAll` and after its own
 * `afterAll`, so those may use the database.
 */
import { afterAll, afterEach, beforeAll } from 'vitest';
import { createTestDatabase, type TestDatabase } from './db.js';
import { startTestService, type TestService } from './service.js';

export interface ServiceFixture {
  /** Set before the file's tests run. */
  db: TestDatabase;
  /** The service the running test started (stopped after it). */
  service: TestService | undefined;
  /** Starts the service on the file's database (startTestService) and keeps it to stop after the test. */
  start(...args: Parameters<typeof startTestService> extends [unknown, ...infer Rest] ? Rest : never): Promise<TestService>;
}

export function serviceFixture(label: string, prepare?: (db: TestDatabase) => Promise<unknown>): ServiceFixture {
  const fixture: ServiceFixture = {
    db: undefined as unknown as TestDatabase,
    service: undefined,
    async start(...args) {
      fixture.service = await startTestService(fixture.db, ...args);
      return fixture.service;
    },
  };
  beforeAll(async () => {
    fixture.db = await createTestDatabase(label);
    await prepare?.(fixture.db);
  });
  afterEach(async () => {
    await fixture.service?.stop();
    fixture.service = undefined;
  });
  afterAll(async () => {
    await (fixture.db as TestDatabase | undefined)?.drop();
  });
  return fixture;
}
