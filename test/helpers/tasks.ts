/** A task and a type's settings as the store answers them, for unit tests of decisions that take them. */
import type { Task } from '../../src/store/task-types.js';
import type { TypeControl } from '../../src/store/type-controls.js';

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
    priority: 0,
    expireAfterMs: null,
    group: null,
    traceParent: null,
    traceState: null,
    ...fields,
  };
}

export function aControl(type: string, fields: Partial<TypeControl> = {}): TypeControl {
  return { type, paused: false, maxConcurrency: null, ratePerSecond: null, groupBy: null, updatedAt: 1, ...fields };
}
