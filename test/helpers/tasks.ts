/** A task as the store answers it, for unit tests of decisions that take tasks. */
import type { Task } from '../../src/store/task-store.js';

export function aTask(fields: Partial<Task> & Pick<Task, 'id'>): Task {
  return {
    key: null,
    type: 'alpha',
    payload: {},
    status: 'pending',
    runAt: 0,
    requestedRunAt: fields.runAt ?? 0,
    timezone: 'UTC',
    attempts: 0,
    maxAttempts: 4,
    misfire: 'run',
    leaseOwner: null,
    leaseUntil: null,
    lastError: null,
    createdAt: 0,
    updatedAt: 0,
    finishedAt: null,
    cron: null,
    seriesId: null,
    tags: [],
    latenessMs: null,
    lastHttpStatus: null,
    lastDurationMs: null,
    lastResponseBytes: null,
    ...fields,
  };
}
