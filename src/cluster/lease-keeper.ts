/**
 * The lease keeper (SHARDING=on): this process's membership and its shard leases. Every LEASE_MS/3,
 * on a connection of its own, it writes its heartbeat, reads the live members, works out by
 * rendezvous which shards it should own, gives up the others (disarming them first) and renews or
 * takes its own; `fence(ids)` names a claim's shards at the epochs it holds them. Invariant 9:
 * ownership is the efficiency, the conditional claim, fenced by epoch, is the safety.
 * See docs/architecture.md#the-lease-keeper and docs/architecture.md#fencing-and-epochs.
 */
import { performance } from 'node:perf_hooks';
import mysql from 'mysql2/promise';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { isConnectionError, loggable } from '../db/errors.js';
import { autocommit, onConnection, transaction, type RunOptions } from '../db/transaction.js';
import { LeaseStore, type ClaimFence } from '../store/leases.js';
import { shardsFor } from './rendezvous.js';
import { SHARDS, shardOf } from './shards.js';

/** Where the keeper's own connection comes from (the Database: same hosts, same failover). */
export interface LeaseConnector {
  /** A connection outside the pool, in UTC, to the host new connections go to now. */
  connectOwn(connectTimeoutMs: number): Promise<mysql.Connection>;
  /** How many hosts DATABASE_URL names: a round tries each at most once. */
  readonly hostCount: number;
  /** `conn` failed with `error`: a node that is not ready sends new connections to the next host. */
  failed(conn: mysql.Connection, error: unknown): void;
}

/**
 * The keeper's gauges and counters. Registered whether or not SHARDING is on (the service builds
 * them either way), so a dashboard reads 0 shards and 0 members from a process that does not share.
 */
export class ShardMetrics {
  readonly shardsOwned: Gauge;
  readonly members: Gauge;
  readonly leaseRenewals: Counter;
  readonly leaseLosses: Counter;
  readonly shardHandovers: Counter;

  constructor(registry: Registry) {
    const registers = [registry];
    this.shardsOwned = new Gauge({
      name: 'punctual_shards_owned',
      help: `Shards (of ${SHARDS}) whose lease this process holds (SHARDING=on; 0 otherwise).`,
      registers,
    });
    this.members = new Gauge({
      name: 'punctual_members',
      help: 'Live processes sharing the tasks, as the last lease renewal saw them (SHARDING=on; 0 otherwise).',
      registers,
    });
    this.leaseRenewals = new Counter({
      name: 'punctual_lease_renewals_total',
      help: 'Shard lease renewal rounds that succeeded.',
      registers,
    });
    this.leaseLosses = new Counter({
      name: 'punctual_lease_losses_total',
      help: 'Shards lost without giving them up: a lease not renewed in time (pause, cut network) or taken by another process.',
      registers,
    });
    this.shardHandovers = new Counter({
      name: 'punctual_shard_handovers_total',
      help: 'Shards this process acquired or gave up (joins, leaves, failovers).',
      registers,
    });
  }
}

export interface LeaseKeeperOptions {
  database: LeaseConnector;
  /** This process's name (the same as its lease_owner of running tasks). */
  owner: string;
  leaseMs: number;
  log: Logger;
  metrics?: ShardMetrics;
  /** Shards just taken: recover and arm their tasks. */
  onAcquire: (shards: number[]) => Promise<void>;
  /**
   * Shards lost or given up: disarm their tasks. Called before a release is written. `given-up`:
   * handed to another live member while this process is healthy (its tasks due before the new
   * owner arms them may still be claimed here: timers/arming.ts); `lost`: the lease lapsed or
   * another process holds the shard; `leaving`: this process stops.
   */
  onLose: (shards: number[], how: ShardLoss) => void;
}

/** Why shards left this process (LeaseKeeperOptions.onLose). */
export type ShardLoss = 'given-up' | 'lost' | 'leaving';

/** Which tasks this process may arm and claim. */
export interface Ownership {
  owns(id: number): boolean;
  mayClaim(id: number): boolean;
}

export const everything: Ownership = { owns: () => true, mayClaim: () => true };

export class LeaseKeeper implements Ownership {
  readonly #options: LeaseKeeperOptions;
  /** The shards held, each with the epoch of this tenure. */
  readonly #owned = new Map<number, number>();
  readonly #leases: LeaseStore;
  /** Monotonic start of the last round that succeeded. */
  #renewedAt = Number.NEGATIVE_INFINITY;
  #conn: mysql.Connection | undefined;
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> | undefined;
  readonly #arming = new Set<Promise<void>>();
  #stopped = false;
  #started = false;
  /** Shards this process is to own and does not hold yet, until it first holds them all (then undefined). */
  #waitingFor: { held: number; wanted: number } | undefined = { held: 0, wanted: 0 };

  constructor(options: LeaseKeeperOptions) {
    this.#options = options;
    this.#leases = new LeaseStore(this.#statementTimeoutMs);
  }

  /** No statement of a round may take longer than a round's period. */
  get #statementTimeoutMs(): number {
    return Math.max(1000, this.periodMs);
  }

  /** How the keeper's work runs on its own connection. */
  get #run(): RunOptions {
    return { statementTimeoutMs: this.#statementTimeoutMs };
  }

  /** Renewals run this often. */
  get periodMs(): number {
    return Math.floor(this.#options.leaseMs / 3);
  }

  /** How long before its end a lease is no longer trusted (clock rate, a slow round trip). */
  get marginMs(): number {
    return Math.floor(this.#options.leaseMs / 5);
  }

  /** Whether the last successful round is recent enough to prove the leases. */
  get valid(): boolean {
    return performance.now() - this.#renewedAt < this.#options.leaseMs - this.marginMs;
  }

  /** The shards held now, in order. */
  ownedShards(): number[] {
    return [...this.#owned.keys()].sort((a, b) => a - b);
  }

  /**
   * The fence of a claim of `ids` decided now: their shards held, each at the epoch of its
   * tenure (the shards not held are left out, so their tasks are refused).
   */
  fence(ids: Iterable<number>): ClaimFence {
    const epochs = new Map<number, number>();
    for (const id of ids) {
      const shard = shardOf(id);
      const epoch = this.#owned.get(shard);
      if (epoch !== undefined) epochs.set(shard, epoch);
    }
    return { owner: this.#options.owner, epochs: [...epochs] };
  }

  get shardsOwned(): number {
    return this.#owned.size;
  }

  /**
   * Until this process first holds every shard rendezvous gives it (the others hand theirs over
   * at their next round, or when their leases run out): how many it holds of how many. Undefined
   * from then on: a later handover (a member joins or leaves) does not make it unready.
   */
  get waitingForShards(): { held: number; wanted: number } | undefined {
    return this.#waitingFor;
  }

  owns(id: number): boolean {
    return this.#owned.has(shardOf(id));
  }

  mayClaim(id: number): boolean {
    return this.valid && this.#owned.has(shardOf(id));
  }

  /** Joins: the tables' rows, a first round (so the process owns its shards when it is ready). */
  async start(): Promise<void> {
    this.#started = true;
    const conn = await this.#connection();
    await autocommit(
      onConnection(conn),
      async (c) => {
        await this.#leases.seed(c, SHARDS);
        await this.#leases.forgetOldMembers(c);
      },
      this.#run,
    );
    this.#round = this.#renew();
    await this.#round;
    this.#schedule();
  }

  /** Leaves: disarms every shard, releases the leases at once and removes the membership. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearTimeout(this.#timer);
    if (!this.#started) return; // stopped during the boot, before it joined
    await this.#round;
    await Promise.allSettled([...this.#arming]);
    const all = this.ownedShards();
    this.#drop(all, 'leaving');
    try {
      const conn = await this.#connection();
      await autocommit(
        onConnection(conn),
        async (c) => {
          await this.#leases.releaseAll(c, this.#options.owner);
          await this.#leases.leave(c, this.#options.owner);
        },
        this.#run,
      );
      this.#options.metrics?.shardHandovers.inc(all.length);
      this.#options.log.info({ shards: all }, 'shards released');
    } catch (error) {
      this.#options.log.warn({ err: loggable(error) }, 'could not release the shard leases; they run out by themselves');
    } finally {
      await this.#conn?.end().catch(() => this.#conn?.destroy());
      this.#conn = undefined;
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#round = this.#renew().finally(() => this.#schedule());
    }, this.periodMs);
    this.#timer.unref();
  }

  async #connection(): Promise<mysql.Connection> {
    if (this.#conn !== undefined) return this.#conn;
    let conn: mysql.Connection;
    // A host that does not answer sends the next attempt to the next host: each is tried once.
    for (let attempt = 1; ; attempt++) {
      try {
        conn = await this.#options.database.connectOwn(Math.max(1000, this.periodMs));
        break;
      } catch (error) {
        if (attempt >= this.#options.database.hostCount || !isConnectionError(error)) throw error;
      }
    }
    conn.on('error', () => {
      if (this.#conn === conn) this.#conn = undefined;
    });
    this.#conn = conn;
    return conn;
  }

  /** Forgets shards locally: nothing of theirs is armed or claimed any more. */
  #drop(shards: number[], how: ShardLoss): void {
    if (shards.length === 0) return;
    for (const shard of shards) this.#owned.delete(shard);
    this.#options.metrics?.shardsOwned.set(this.#owned.size);
    this.#options.onLose(shards, how);
  }

  /** One round; never throws (a failed round is told, and the next one tries again). */
  async #renew(): Promise<void> {
    const started = performance.now();
    const { log, metrics } = this.#options;
    if (!this.valid && this.#owned.size > 0) {
      // Too long since the last proof: another process may own these now.
      const lost = this.ownedShards();
      this.#drop(lost, 'lost');
      metrics?.leaseLosses.inc(lost.length);
      log.warn({ shards: lost }, 'shards lost: their leases could not be renewed in time');
    }
    // A connection that breaks (its node died, or is not ready) is replaced at once by one to the
    // next host of DATABASE_URL, within the round: the leases are renewed before they run out.
    for (let attempt = 1; ; attempt++) {
      let conn: mysql.Connection | undefined;
      try {
        conn = await this.#connection();
        await this.#renewOn(conn, started);
        return;
      } catch (error) {
        if (conn !== undefined) this.#options.database.failed(conn, error);
        this.#conn?.destroy();
        this.#conn = undefined;
        // A statement that timed out met a stalled cluster (Galera holds commits until it has
        // declared a dead node gone), not a dead host: the next round tries again.
        const stalled = (error as { code?: string }).code === 'PROTOCOL_SEQUENCE_TIMEOUT';
        if (!this.#stopped && attempt <= this.#options.database.hostCount && isConnectionError(error) && !stalled) {
          log.warn({ err: loggable(error), attempt }, 'lease renewal lost its connection; trying the next host');
          continue;
        }
        log.warn({ err: loggable(error) }, 'lease renewal failed; trying again');
        return;
      }
    }
  }

  /** The round's statements on `conn`; throws when one fails. */
  async #renewOn(conn: mysql.Connection, started: number): Promise<void> {
    const { owner, leaseMs, log, metrics } = this.#options;
    const leases = this.#leases;
    const source = onConnection(conn);
    const live = await autocommit(
      source,
      async (c) => {
        await leases.heartbeat(c, owner);
        return leases.live(c, leaseMs);
      },
      this.#run,
    );
    const members = [...new Set([...live, owner])].sort();
    metrics?.members.set(members.length);
    const wanted = shardsFor(owner, members);
    const giveUp = this.ownedShards().filter((shard) => !wanted.has(shard));
    if (giveUp.length > 0) {
      this.#drop(giveUp, 'given-up');
      await autocommit(source, (c) => leases.release(c, owner, giveUp), this.#run);
      metrics?.shardHandovers.inc(giveUp.length);
      log.info({ shards: giveUp }, 'shards released');
    }
    if (this.#stopped) return;
    const held = await transaction(
      source,
      async (c) => {
        await leases.take(c, owner, [...wanted], leaseMs);
        return leases.held(c, owner);
      },
      this.#run,
    );
    if (this.#stopped) return;
    this.#renewedAt = started;
    metrics?.leaseRenewals.inc();
    // Not held any more, or held in another tenure than the one this process knew.
    const lost = [...this.#owned].filter(([shard, epoch]) => held.get(shard) !== epoch).map(([shard]) => shard);
    if (lost.length > 0) {
      this.#drop(lost, 'lost');
      metrics?.leaseLosses.inc(lost.length);
      log.warn({ shards: lost }, 'shards lost: another process holds them, or held them meanwhile');
    }
    const gained = [...held.keys()].filter((shard) => !this.#owned.has(shard)).sort((a, b) => a - b);
    if (gained.length > 0) {
      for (const shard of gained) this.#owned.set(shard, held.get(shard)!);
      metrics?.shardsOwned.set(this.#owned.size);
      metrics?.shardHandovers.inc(gained.length);
      log.info({ shards: gained, owned: this.#owned.size, members: members.length }, 'shards acquired');
      const arming = this.#options
        .onAcquire(gained)
        .catch((error: unknown) => log.warn({ err: loggable(error) }, 'arming newly acquired shards failed; the reconcile arms them'));
      this.#arming.add(arming);
      void arming.finally(() => this.#arming.delete(arming));
    }
    if (this.#waitingFor !== undefined) {
      const missing = [...wanted].filter((shard) => !this.#owned.has(shard)).length;
      this.#waitingFor = missing === 0 ? undefined : { held: wanted.size - missing, wanted: wanted.size };
      if (missing === 0) log.info({ shards: this.#owned.size, members: members.length }, 'holds its shards');
    }
  }
}
