/**
 * The order-close consumers a PHP shop runs before punctual, as its write-ups describe them, for the
 * cutover test (test/process/cutover.test.ts): a resident process that pops due order numbers off
 * a Redis ZSET every 200 ms (one Lua script: ZRANGEBYSCORE … -inf now, ZREM, and HSET into a
 * processing hash), closes each order and HDELs it; and a poller that every second claims the due
 * rows of an `async_task` table (`UPDATE … SET status = 1 WHERE id = ? AND status = 0`), closes each
 * order and marks its row 2. Both close an order the way those write-ups insist on: the order row
 * locked (FOR UPDATE) before its status is read, closed only while `unpaid`, its items put back in
 * stock. Their connection sets `@closer = 'old'`, which the shop's ledger trigger records with each
 * close, so a test tells their closes from punctual's.
 *
 * A stop is graceful, like `php server.php stop`: no new round starts, the one in hand finishes.
 */
import type { Redis } from 'ioredis';
import mysql from 'mysql2/promise';

/** How a consumer names the order it closes: by its number (a ZSET member) or by its id (`{"order_id": 42}`). */
export type OrderRef = { orderSn: string } | { id: number };

export interface ConsumerCounts {
  /** Orders this consumer closed. */
  closed: number;
  /** Orders it found closed already (by the other system, in the cutover window), or paid. */
  leftAlone: number;
  /** Deadlocks met and retried (two closers of orders that share goods). */
  deadlocks: number;
}

/**
 * The write-ups' closeIfUnpaid: one transaction, the order locked before its status is read. Goods
 * are updated in id order, as close_order does, and a deadlock is retried rather than acknowledged
 * and forgotten (docs/migrating.md says why both matter while two closers run).
 */
async function closeIfUnpaid(conn: mysql.Connection, ref: OrderRef, counts: ConsumerCounts): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await conn.query('BEGIN');
      const [rows] = await conn.query<mysql.RowDataPacket[]>(
        'orderSn' in ref
          ? 'SELECT id, status, items FROM orders WHERE order_sn = ? FOR UPDATE'
          : 'SELECT id, status, items FROM orders WHERE id = ? FOR UPDATE',
        ['orderSn' in ref ? ref.orderSn : ref.id],
      );
      const order = rows[0];
      if (order === undefined || order.status !== 'unpaid') {
        await conn.query('COMMIT');
        counts.leftAlone++;
        return;
      }
      await conn.query("UPDATE orders SET status = 'closed', closed_at = NOW(3) WHERE id = ?", [order.id]);
      const items = (typeof order.items === 'string' ? JSON.parse(order.items) : order.items) as { goods_id: number; num: number }[];
      for (const item of [...items].sort((a, b) => a.goods_id - b.goods_id))
        await conn.query('UPDATE goods SET stock = stock + ? WHERE id = ?', [item.num, item.goods_id]);
      await conn.query('COMMIT');
      counts.closed++;
      return;
    } catch (error) {
      await conn.query('ROLLBACK').catch(() => undefined);
      if ((error as { errno?: number }).errno !== 1213 || attempt === 5) throw error;
      counts.deadlocks++;
    }
  }
}

/** A loop that runs `tick` every `everyMs` until stopped; stop() waits for the round in hand. */
abstract class Loop {
  readonly counts: ConsumerCounts = { closed: 0, leftAlone: 0, deadlocks: 0 };
  readonly errors: Error[] = [];
  #running = false;
  #current: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  protected conn!: mysql.Connection;

  constructor(
    protected readonly databaseUrl: string,
    private readonly everyMs: number,
  ) {}

  protected abstract tick(): Promise<void>;

  async start(): Promise<void> {
    this.conn = await mysql.createConnection({ uri: this.databaseUrl });
    await this.conn.query("SET @closer = 'old'");
    this.#running = true;
    const round = () => {
      if (!this.#running) return;
      this.#current = this.tick()
        .catch((error: Error) => {
          // The write-ups' consumer logs and carries on: an exception must not end the process.
          this.errors.push(error);
        })
        .finally(() => {
          if (this.#running) this.#timer = setTimeout(round, this.everyMs);
        });
    };
    round();
  }

  /** Graceful: no new round; the one in hand finishes. */
  async stop(): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    clearTimeout(this.#timer);
    await this.#current;
    await this.conn.end();
  }

  protected close(ref: OrderRef): Promise<void> {
    return closeIfUnpaid(this.conn, ref, this.counts);
  }
}

const LUA_POP = `
local jobs = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for i = 1, #jobs do
  redis.call('ZREM', KEYS[1], jobs[i])
  redis.call('HSET', KEYS[2], jobs[i], ARGV[1])
end
return jobs`;

/**
 * The Redis ZSET consumer: every 200 ms up to 50 due members (score: epoch seconds), closed one by
 * one. `clockAheadMs`: its host's clock against punctual's (two machines agree to tens of
 * milliseconds, not to one), so that in a test it sometimes takes an order before punctual does
 * and sometimes after.
 */
export class ZsetConsumer extends Loop {
  constructor(
    databaseUrl: string,
    private readonly redis: Redis,
    private readonly queue: string,
    private readonly processing: string,
    private readonly clockAheadMs = 0,
  ) {
    super(databaseUrl, 200);
  }

  protected async tick(): Promise<void> {
    const now = Math.floor((Date.now() + this.clockAheadMs) / 1000);
    const jobs = (await this.redis.eval(LUA_POP, 2, this.queue, this.processing, now, 50)) as string[];
    for (const orderSn of jobs) {
      await this.close({ orderSn });
      await this.redis.hdel(this.processing, orderSn);
    }
  }
}

/**
 * The async_task poller: every second (`everyMs`) up to 50 due rows of status 0, each claimed,
 * closed and marked 2. `clockAheadMs`: its host's clock against punctual's, as for ZsetConsumer.
 */
export class AsyncTaskPoller extends Loop {
  constructor(
    databaseUrl: string,
    private readonly table: string,
    private readonly refOf: (params: Record<string, unknown>) => OrderRef,
    { everyMs = 1000, clockAheadMs = 0 }: { everyMs?: number; clockAheadMs?: number } = {},
  ) {
    super(databaseUrl, everyMs);
    this.clockAheadMs = clockAheadMs;
  }

  private readonly clockAheadMs: number;

  protected async tick(): Promise<void> {
    const now = Math.floor((Date.now() + this.clockAheadMs) / 1000);
    const [tasks] = await this.conn.query<mysql.RowDataPacket[]>(
      `SELECT id, params FROM \`${this.table}\` WHERE status = 0 AND execute_time <= ? ORDER BY execute_time LIMIT 50`,
      [now],
    );
    for (const task of tasks) {
      const [claim] = await this.conn.query<mysql.ResultSetHeader>(
        `UPDATE \`${this.table}\` SET status = 1, updated_at = ? WHERE id = ? AND status = 0`,
        [now, task.id],
      );
      if (claim.affectedRows !== 1) continue; // another poller has it
      await this.close(this.refOf(JSON.parse(String(task.params)) as Record<string, unknown>));
      await this.conn.query(`UPDATE \`${this.table}\` SET status = 2, updated_at = ? WHERE id = ?`, [
        Math.floor(Date.now() / 1000),
        task.id,
      ]);
    }
  }
}
