/**
 * punctual as a library, in this test process: `createPunctual` from the package's own name,
 * the configuration as an object and the shop's handlers as plain objects → start, a create over
 * the HTTP API, the run (its ledger row, written in the completion transaction), stop.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPunctual, defineHandler, type Punctual } from 'punctual';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('library');
  await db.execute('CREATE TABLE memberships (user_id INT PRIMARY KEY, level VARCHAR(16) NOT NULL, reset_by BIGINT NULL)');
  await db.execute("INSERT INTO memberships VALUES (1, 'gold', NULL), (2, 'gold', NULL)");
});

afterAll(async () => {
  await db?.drop();
});

const resetMembership = defineHandler({
  type: 'reset_membership',
  effect: 'database',
  payload: {
    type: 'object',
    properties: { userId: { type: 'integer', minimum: 1 } },
    required: ['userId'],
    additionalProperties: false,
  } as const,
  async run({ tx, payload, task }) {
    const { userId } = payload;
    const result = await tx.query<{ affectedRows: number }>("UPDATE memberships SET level = 'basic', reset_by = ? WHERE user_id = ?", [
      task.id,
      userId,
    ]);
    return result.affectedRows === 1 ? 'reset' : 'no such member';
  },
});

describe('createPunctual', () => {
  let punctual: Punctual;

  it('starts, takes a create over HTTP, runs the handler, and stops', async () => {
    punctual = createPunctual({ DATABASE_URL: db.url, PORT: 0, LOG_LEVEL: 'warn', handlers: [resetMembership] });
    expect(punctual.url).toBeUndefined();
    const url = await punctual.start();
    expect(punctual.url).toBe(url);
    const created = await fetch(`${url}/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'reset_membership', payload: { userId: 2 }, delayMs: 50 }),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: number };
    const refused = await fetch(`${url}/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'reset_membership', payload: { userId: 'two' }, delayMs: 0 }),
    });
    expect(refused.status).toBe(400);
    await waitFor(
      async () => ((await (await fetch(`${url}/tasks/${id}`)).json()) as { status: string }).status === 'done',
      10_000,
      'the reset',
    );
    expect(await db.query<any[]>('SELECT user_id, level, reset_by FROM memberships ORDER BY user_id')).toEqual([
      { user_id: 1, level: 'gold', reset_by: null },
      { user_id: 2, level: 'basic', reset_by: id },
    ]);
    await punctual.stop();
    await punctual.stop(); // twice is fine
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  });

  it('throws a ConfigError naming the setting at once', () => {
    expect(() => createPunctual({ DATABASE_URL: db.url, PORT: 'eighty' })).toThrow(/PORT must be an integer/);
  });

  it('rejects start with the module error when a handler is malformed', async () => {
    const broken = createPunctual({
      DATABASE_URL: db.url,
      PORT: 0,
      LOG_LEVEL: 'warn',
      handlers: [{ ...resetMembership, run: undefined as never }],
    });
    await expect(broken.start()).rejects.toThrow('createPunctual handlers: handler "reset_membership": run must be a function');
    await broken.stop();
  });
});
