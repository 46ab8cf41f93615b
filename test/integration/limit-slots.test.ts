/**
 * The fleet's slots of the type limits (store/limit-slots.ts) on a real database: many takers at
 * once never hold more than a group's slots, a freed or lapsed slot is taken again, and a free
 * names its holder. Each taker is its own pool, as a process would be.
 */
import type { RowDataPacket } from 'mysql2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/db/connection.js';
import { FleetSlots } from '../../src/dispatch/fleet-slots.js';
import { TypeAdmission } from '../../src/dispatch/limits.js';
import { LimitSlotStore, type SlotGroup } from '../../src/store/limit-slots.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';
import { aControl, aTask } from '../helpers/tasks.js';

let db: TestDatabase;
const databases: Database[] = [];

beforeAll(async () => {
  db = await createTestDatabase('limit_slots');
  for (let i = 0; i < 6; i++) databases.push(new Database({ url: db.url, poolSize: 4, lockWaitTimeoutS: 5 }));
});

afterAll(async () => {
  await Promise.all(databases.map((database) => database.close()));
  await db?.drop();
});

async function liveHolders(group: SlotGroup): Promise<string[]> {
  const rows = await db.query<RowDataPacket[]>(
    'SELECT holder FROM punctual_limit_slots WHERE type = ? AND group_digest = ? AND kind = ? AND leased_until > UTC_TIMESTAMP(3)',
    [group.type, group.digest, group.kind],
  );
  return rows.map((row) => row.holder as string);
}

describe('limit slots', () => {
  it('go to one taker each, however many race for them', async () => {
    const group: SlotGroup = { type: 'race', digest: 'g1', kind: 'run' };
    const stores = databases.map((database) => new LimitSlotStore(database));
    // Six takers, three tries each of three slots at once, for a group of five.
    const got = await Promise.all(
      stores.flatMap((store, i) =>
        [0, 1, 2].map((k) => store.take(group, 5, 3, `taker${i}:${k}`, 60_000).then((slots) => ({ holder: `taker${i}:${k}`, slots }))),
      ),
    );
    const taken = got.flatMap(({ holder, slots }) => slots.map((slot) => `${slot}@${holder}`));
    expect(got.flatMap(({ slots }) => slots).sort()).toEqual([0, 1, 2, 3, 4]);
    expect(taken).toHaveLength(5);
    expect((await liveHolders(group)).sort()).toEqual(got.flatMap(({ holder, slots }) => slots.map(() => holder)).sort());
    // Full: nobody gets one more.
    expect(await stores[0]!.take(group, 5, 1, 'late', 60_000)).toEqual([]);
  });

  it('a freed slot is taken again at once, a lapsed one when its lease ends; a free names its holder', async () => {
    const group: SlotGroup = { type: 'lease', digest: '', kind: 'run' };
    const store = new LimitSlotStore(databases[0]!);
    expect(await store.take(group, 2, 2, 'a', 60_000)).toEqual([0, 1]);
    await store.free(group, [0], 'someone-else');
    expect(await store.take(group, 2, 1, 'b', 60_000)).toEqual([]);
    await store.free(group, [0], 'a');
    expect(await store.take(group, 2, 1, 'b', 60_000)).toEqual([0]);
    // A short lease: its slot comes back when it ends, and not before.
    await store.free(group, [1], 'a');
    expect(await store.take(group, 2, 1, 'c', 400)).toEqual([1]);
    expect(await store.take(group, 2, 1, 'd', 60_000)).toEqual([]);
    const at = Date.now();
    const slots = await waitFor(
      async () => {
        const taken = await store.take(group, 2, 1, 'd', 60_000);
        return taken.length > 0 ? taken : undefined;
      },
      5_000,
      'the lapsed slot',
    );
    expect(slots).toEqual([1]);
    expect(Date.now() - at).toBeGreaterThanOrEqual(250);
    // A smaller size leaves the slots above it alone.
    expect(await store.take(group, 1, 1, 'e', 60_000)).toEqual([]);
  });
});

describe('type admission with the fleet', () => {
  it('remembers at most maxGroups of the groups the fleet refused, however many distinct groups are refused', async () => {
    const store = new LimitSlotStore(databases[0]!);
    const admission = (owner: string) => {
      const limits = new TypeAdmission({ now: () => Date.now() }, { maxGroups: 10, fleet: new FleetSlots(store, owner) });
      limits.apply([aControl('capped', { maxConcurrency: 1, groupBy: 'body' })]);
      return limits;
    };
    const tasksOf = (first: number) =>
      Array.from({ length: 100 }, (_, i) => aTask({ id: first + i, type: 'capped', payload: { body: `group-${i}` }, runAt: i }));
    // One process holds the one slot of each of 100 groups; another asks for all of them.
    const holder = admission('holder');
    await holder.reserve(tasksOf(1), () => 60_000);
    const asker = admission('asker');
    await asker.reserve(tasksOf(1001), () => 60_000);
    expect(tasksOf(1001).every((task) => asker.admit(task, Date.now()) === undefined)).toBe(true);
    expect(asker.groupsRefused).toBe(10);
  });
});
