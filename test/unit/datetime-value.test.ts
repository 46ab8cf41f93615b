/**
 * datetimeValue: an instant as the literal mysql2 writes for its Date on punctual's connections
 * (UTC), made once and given to many placeholders. The SQL sent must be the same text.
 */
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { datetimeValue } from '../../src/db/connection.js';

describe('datetimeValue', () => {
  it('is the text mysql2 writes for the same instant as a Date, in UTC', () => {
    const instants = [
      0,
      1,
      999,
      Date.UTC(2030, 0, 1),
      Date.UTC(2027, 5, 1, 2, 0, 0, 123),
      Date.UTC(9999, 11, 31, 23, 59, 59, 999),
      Date.UTC(1000, 0, 1, 0, 0, 0, 7),
      1_796_484_246_015,
    ];
    for (const ms of instants) {
      expect(mysql.format('INSERT INTO t VALUES (?, ?)', [datetimeValue(ms), 1])).toBe(
        mysql.format('INSERT INTO t VALUES (?, ?)', [new Date(ms), 1], false, 'Z'),
      );
    }
    expect(mysql.format('?', [datetimeValue(Date.UTC(2027, 5, 1, 2, 0, 0, 123))])).toBe("'2027-06-01 02:00:00.123'");
  });
});
