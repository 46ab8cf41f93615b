/**
 * What the test clock (app/test-clock.ts) reads and writes in the database: the mark that says
 * every task here was made under the test clock (punctual_meta), and what falls due next, so an
 * advance steps from one due instant to the next. Statements: sql/test-clock.ts.
 */
import type { Database } from '../db/connection.js';
import { Statements, type Result } from './statements.js';
import { TEST_CLOCK, TEST_CLOCK_MARK } from './sql/test-clock.js';

export class TestClockStore {
  readonly #sql: Statements;

  constructor(database: Database) {
    this.#sql = new Statements(database);
  }

  /** Whether the database carries the test clock's mark. */
  async marked(): Promise<boolean> {
    return (await this.#sql.arrays<[string]>(TEST_CLOCK.readMark, [TEST_CLOCK_MARK])).length > 0;
  }

  async mark(): Promise<void> {
    await this.#sql.query(TEST_CLOCK.mark, [TEST_CLOCK_MARK, 'on']);
  }

  /** Takes the mark away: answers whether there was one. */
  async unmark(): Promise<boolean> {
    const result = await this.#sql.query<Result>(TEST_CLOCK.unmark, [TEST_CLOCK_MARK]);
    return result.affectedRows > 0;
  }

  /** How many tasks the database holds, in any state (counted up to 1000). */
  async taskCount(): Promise<number> {
    const [row] = await this.#sql.arrays<[number]>(TEST_CLOCK.anyTask, []);
    return Number(row?.[0] ?? 0);
  }

  /** The first instant after `now` at which a pending task falls due or a running task's lease ends. */
  async nextAfter(now: number): Promise<number | undefined> {
    const at = new Date(now);
    const [row] = await this.#sql.arrays<[Date | null, Date | null]>(TEST_CLOCK.nextAfter, [at, at]);
    const [runAt, leaseEnd] = row ?? [null, null];
    // A lease has run out once its end has passed (lease_until < now): the instant after it.
    const times = [runAt?.getTime(), leaseEnd === null || leaseEnd === undefined ? undefined : leaseEnd.getTime() + 1];
    const known = times.filter((time): time is number => time !== undefined);
    return known.length === 0 ? undefined : Math.min(...known);
  }

  /** The pending tasks due by `now`, counted by type. */
  async dueByType(now: number): Promise<Map<string, number>> {
    const rows = await this.#sql.arrays<[string, number]>(TEST_CLOCK.dueByType, [new Date(now)]);
    return new Map(rows.map(([type, count]) => [type, Number(count)]));
  }

  /** The pending tasks due by `now`, with their types (the first 100). */
  async dueIds(now: number): Promise<{ id: number; type: string }[]> {
    const rows = await this.#sql.arrays<[number, string]>(TEST_CLOCK.dueIds, [new Date(now)]);
    return rows.map(([id, type]) => ({ id: Number(id), type }));
  }

  /** The ids of the running tasks (the first 100). */
  async running(): Promise<number[]> {
    return (await this.#sql.arrays<[number]>(TEST_CLOCK.running, [])).map(([id]) => Number(id));
  }
}
