/**
 * The task store: every statement about tasks, in three rooms by what a caller does with them,
 * on one database. It holds no policy (no retry of a failed task, no recurrence, no dedup
 * decision): those are the lifecycle's (src/lifecycle/).
 *
 *   reading and listing .................. task-reads.ts  (TaskReads)
 *   the writes of a run, in its transaction  run-writes.ts  (RunWrites)
 *   creates, a shop's changes, bulk, retention  task-changes.ts (TaskChanges)
 *
 * The types they take and answer are task-types.ts's, the statements sql/tasks.ts's, the row
 * mapping rows.ts's.
 */
import type { Connection, Database } from '../db/connection.js';
import { lockConflicts } from '../db/retry.js';
import { DEFAULT_TRIES, transaction } from '../db/transaction.js';
import { RunWrites } from './run-writes.js';
import { TaskChanges } from './task-changes.js';
import { TaskReads } from './task-reads.js';

export class TaskStore {
  readonly reads: TaskReads;
  readonly runs = new RunWrites();
  readonly changes: TaskChanges;

  /** `untimed`: the types whose tasks get no timer (worker types: the pull hub watches them). */
  constructor(
    private readonly database: Database,
    untimed: () => readonly string[] = () => [],
  ) {
    this.reads = new TaskReads(database, untimed);
    this.changes = new TaskChanges(database, this.reads);
  }

  /**
   * BEGIN … COMMIT, run again from the start after a deadlock or lock-wait timeout (the whole
   * transaction was rolled back): the transaction runner on the pool.
   */
  transaction<T>(fn: (conn: Connection) => Promise<T>, tries = DEFAULT_TRIES): Promise<T> {
    return transaction(this.database, fn, { retry: lockConflicts(tries) });
  }
}
