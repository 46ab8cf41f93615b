/**
 * Next occurrence: when a recurring task finishes (done, failed for good or skipped), its
 * series' next occurrence is written in the same transaction, so a series neither stops nor
 * doubles (a unique index on (series_id, run_at) makes a second write find the first).
 */
import type { Connection } from '../db/connection.js';
import { nextOccurrence } from '../time/recurrence.js';
import type { TaskStore } from '../store/task-store.js';
import type { Task } from '../store/task-types.js';
import { arm, type TimerEffect } from './effects.js';

/** Writes the next occurrence of each recurring task among `finished`; answers their timers. */
export async function nextOccurrences(store: TaskStore, conn: Connection, finished: Task[], now: number): Promise<TimerEffect[]> {
  const effects: TimerEffect[] = [];
  for (const task of finished) {
    if (task.cron === null) continue;
    const runAt = nextOccurrence(task.cron, task.timezone, Math.max(task.runAt, now));
    if (runAt === null) continue;
    const id = await store.runs.insertOccurrence(conn, task, task.seriesId ?? task.id, runAt, now);
    effects.push(arm(id, runAt, task.priority, task.type));
  }
  return effects;
}
