/** What kind of error stopped a batch or a handler, from errors shaped as the driver and drizzle give them. */
import { describe, expect, it } from 'vitest';
import { batchErrorOf, HandlerOverran, HandlerThrew, handlerErrorKind } from '../../src/dispatch/error-kind.js';
import { PermanentError } from '../../src/handlers/handler.js';
import { TimeoutError } from '../../src/util/async.js';
import { aTask } from '../helpers/tasks.js';

/** As drizzle wraps a driver error: the driver's error as `cause`. */
const wrapped = (cause: object) => Object.assign(new Error('Failed query: UPDATE punctual_tasks …'), { cause });
const deadlock = wrapped({ errno: 1213, code: 'ER_LOCK_DEADLOCK', message: 'Deadlock found' });
const lockWait = wrapped({ errno: 1205, code: 'ER_LOCK_WAIT_TIMEOUT', message: 'Lock wait timeout exceeded' });
const lost = wrapped({ code: 'PROTOCOL_CONNECTION_LOST', fatal: true, message: 'Connection lost: The server closed the connection.' });
const trigger = wrapped({ errno: 1644, code: 'ER_SIGNAL_EXCEPTION', message: 'refused by the shop' });

describe('the kind of a batch error', () => {
  it('sorts the database errors', () => {
    expect(batchErrorOf(deadlock).kind).toBe('lock-conflict');
    expect(batchErrorOf(lockWait).kind).toBe('lock-conflict');
    expect(batchErrorOf(lost).kind).toBe('lost-connection');
    expect(batchErrorOf(trigger).kind).toBe('row-failure');
  });

  it('a lost connection before a lock conflict: a connection killed while it waited for a lock', () => {
    expect(batchErrorOf(wrapped({ errno: 1205, fatal: true })).kind).toBe('lost-connection');
  });

  it('keeps what the dispatcher needs of a handler that threw or overran', () => {
    const threw = new HandlerThrew(7, new Error('boom'));
    expect(batchErrorOf(threw)).toEqual({ kind: 'handler', error: threw });
    const overran = new HandlerOverran(aTask({ id: 8 }), 300);
    expect(batchErrorOf(overran)).toEqual({ kind: 'overran', error: overran });
  });
});

describe('the kind of a handler error', () => {
  it("tells the task's own failures from nobody's", () => {
    expect(handlerErrorKind(new Error('boom'))).toBe('handler');
    expect(handlerErrorKind(new PermanentError('never'))).toBe('permanent');
    expect(handlerErrorKind(new TimeoutError('slow'))).toBe('overran');
    expect(handlerErrorKind(deadlock)).toBe('lock-conflict');
    expect(handlerErrorKind(lost)).toBe('lost-connection');
    expect(handlerErrorKind(trigger)).toBe('handler');
  });
});
