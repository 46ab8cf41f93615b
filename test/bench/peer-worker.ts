/**
 * One peer's worker for the lateness benchmark (test/bench/peers.ts), in a process of its own as a
 * shop runs it, at the peer's defaults: only what it needs to connect and the no-op handler are
 * given. The handler notes how late it started (lateness-file.mjs) and does nothing else. Prints
 * `ready` once it works; SIGTERM stops it the peer's own graceful way.
 *
 *   node --import tsx test/bench/peer-worker.ts bullmq|graphile-worker|pg-boss
 *
 * BENCH_QUEUE names the queue (BullMQ, pg-boss) or the task (graphile-worker); BENCH_REDIS_URL and
 * BENCH_PG_URL say where.
 */
import { Worker } from 'bullmq';
import { run } from 'graphile-worker';
import PgBoss from 'pg-boss';
// @ts-expect-error -- a plain module of the bench, shared with punctual's handler module
import { flush, record } from './lateness-file.mjs';

interface Due {
  i: number;
  due: number;
}

const peer = process.argv[2];
const queue = process.env.BENCH_QUEUE ?? 'noop';
const redisUrl = new URL(process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379');
const pgUrl = process.env.BENCH_PG_URL ?? 'postgres://punctual_bench:punctual_bench@127.0.0.1:5432/punctual_bench';
const note = (data: Due) => (record as (i: number, due: number) => void)(data.i, data.due);

let stop: () => Promise<void>;
if (peer === 'bullmq') {
  // BullMQ requires maxRetriesPerRequest null on a worker's connection; everything else its default (concurrency 1).
  const worker = new Worker<Due>(
    queue,
    async (job) => {
      note(job.data);
    },
    { connection: { host: redisUrl.hostname, port: Number(redisUrl.port || 6379), maxRetriesPerRequest: null } },
  );
  await worker.waitUntilReady();
  stop = () => worker.close();
} else if (peer === 'graphile-worker') {
  // Defaults: concurrency 1, pollInterval 2000 ms, LISTEN/NOTIFY for jobs added.
  const runner = await run({
    connectionString: pgUrl,
    taskList: {
      [queue]: async (payload) => {
        note(payload as Due);
      },
    },
  });
  stop = () => runner.stop();
} else if (peer === 'pg-boss') {
  // Defaults: a worker fetches batchSize 1 every pollingIntervalSeconds 2.
  const boss = new PgBoss(pgUrl);
  boss.on('error', (error) => process.stderr.write(`pg-boss: ${error.message}\n`));
  await boss.start();
  await boss.createQueue(queue);
  await boss.work<Due>(queue, async ([job]) => {
    note(job!.data);
  });
  stop = () => boss.stop({ graceful: true, wait: true, timeout: 5000 });
} else {
  throw new Error(`unknown peer ${peer}: bullmq, graphile-worker or pg-boss`);
}

process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  void stop().then(() => {
    (flush as () => void)();
    process.exit(0);
  });
});
