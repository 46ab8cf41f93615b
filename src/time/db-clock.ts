/**
 * The database's clock against punctual's: a shop's own `INSERT … run_at = UTC_TIMESTAMP(3)` is
 * stamped by the server's clock and fires off by the difference. The offset is measured at boot and
 * after every reconcile (of three samples, the midpoint of the shortest round trip), exported as
 * punctual_db_clock_offset_seconds, logged past WARN_MS and shown on /readyz; readiness stays 200.
 * The statement is the db catalogue's (src/db/sql.ts).
 * See docs/architecture.md#the-databases-clock.
 */
import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import type mysql from 'mysql2/promise';
import type { Clock } from './clock.js';
import type { Database } from '../db/connection.js';
import { DB } from '../db/sql.js';
import { autocommit } from '../db/transaction.js';

/** Past this, direct inserts fire noticeably off: warn. */
export const WARN_MS = 100;
const SAMPLES = 3;

export interface ClockReading {
  /** Database time − punctual's time, in ms; null before the first measurement. */
  offsetMs: number | null;
  /** Half the round trip of the sample used: the measurement's own uncertainty. */
  uncertaintyMs: number | null;
  /** Set when |offsetMs| is past WARN_MS. */
  warning?: string;
}

export class DbClock {
  readonly #database: Database;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #gauge: Gauge;
  #reading: ClockReading = { offsetMs: null, uncertaintyMs: null };
  #measuring: Promise<void> | undefined;

  constructor(options: { database: Database; clock: Clock; log: Logger; registry: Registry }) {
    this.#database = options.database;
    this.#clock = options.clock;
    this.#log = options.log;
    this.#gauge = new Gauge({
      name: 'punctual_db_clock_offset_seconds',
      help: "The database server's clock minus punctual's (positive: the database is ahead). Tasks a shop inserts with NOW(3)/UTC_TIMESTAMP(3) fire off by this much.",
      registers: [options.registry],
    });
  }

  get reading(): ClockReading {
    return this.#reading;
  }

  /** Measures now; a measurement under way is joined. Never throws: a failure keeps the last reading. */
  measure(): Promise<void> {
    this.#measuring ??= this.#measure()
      .catch((error: unknown) => this.#log.debug({ err: error }, 'database clock check failed; keeping the last reading'))
      .finally(() => {
        this.#measuring = undefined;
      });
    return this.#measuring;
  }

  async #measure(): Promise<void> {
    let best: { offsetMs: number; halfRoundTripMs: number } | undefined;
    await autocommit(this.#database, async (conn) => {
      best = undefined; // a second try starts over
      for (let i = 0; i < SAMPLES; i++) {
        const sent = this.#clock.now();
        const [rows] = await conn.query<mysql.RowDataPacket[]>(DB.serverNowUs);
        const received = this.#clock.now();
        const serverMs = Number(rows[0]!.us) / 1000;
        const sample = { offsetMs: serverMs - (sent + received) / 2, halfRoundTripMs: (received - sent) / 2 };
        if (best === undefined || sample.halfRoundTripMs < best.halfRoundTripMs) best = sample;
      }
    });
    const { offsetMs, halfRoundTripMs } = best!;
    const was = this.#reading.warning !== undefined;
    const rounded = Math.round(offsetMs * 10) / 10;
    const reading: ClockReading = { offsetMs: rounded, uncertaintyMs: Math.round(halfRoundTripMs * 10) / 10 };
    if (Math.abs(offsetMs) > WARN_MS) {
      reading.warning = `the database clock is ${Math.abs(Math.round(offsetMs))} ms ${offsetMs > 0 ? 'ahead of' : 'behind'} punctual's: tasks inserted with NOW(3) or UTC_TIMESTAMP(3) fire that much ${offsetMs > 0 ? 'late' : 'early'}`;
    }
    this.#reading = reading;
    this.#gauge.set(offsetMs / 1000);
    if (reading.warning !== undefined && !was) this.#log.warn({ dbClockOffsetMs: rounded }, reading.warning);
    if (reading.warning === undefined && was)
      this.#log.info({ dbClockOffsetMs: rounded }, "the database clock agrees with punctual's again");
  }
}
