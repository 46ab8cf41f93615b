/**
 * npm run soak: steady load on the real server for SOAK_MINUTES (default 30), to catch the slow
 * leaks the seeds' authors found after weeks. Every minute it prints RSS and heap; at the end,
 * their slopes over the minutes after warm-up (least squares), in MB per hour.
 *
 * The load: about RATE close_order tasks a second created over HTTP (due 0.5–3 s later), one in
 * ten a webhook to a local receiver that fails one call in five, one in twenty cancelled, and the
 * pending list read every second.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BenchDb, memoryOf, scrape, sleep, startServer } from '../bench/lib.js';

const MINUTES = Number(process.env.SOAK_MINUTES ?? 30);
const RATE = Number(process.env.SOAK_RATE ?? 100);
const WARM_UP_MINUTES = Math.min(5, Math.floor(MINUTES / 3));

/** Least-squares slope of y over x. */
function slope(points: [number, number][]): number {
  const n = points.length;
  const mx = points.reduce((sum, [x]) => sum + x, 0) / n;
  const my = points.reduce((sum, [, y]) => sum + y, 0) / n;
  const sxy = points.reduce((sum, [x, y]) => sum + (x - mx) * (y - my), 0);
  const sxx = points.reduce((sum, [x]) => sum + (x - mx) ** 2, 0);
  return sxx === 0 ? 0 : sxy / sxx;
}

async function main(): Promise<void> {
  let calls = 0;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(++calls % 5 === 0 ? 503 : 200).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

  const db = await BenchDb.create();
  await db.seedOrders(MINUTES * 60 * RATE + 10_000);
  const server = await startServer(db, {
    env: { WEBHOOK_SECRET: 'soak-secret', WEBHOOK_ALLOWED_HOSTS: '127.0.0.1', RETRY_BASE_MS: '500' },
  });
  const post = (body: unknown) =>
    fetch(`${server.baseUrl}/tasks`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(
      (response) => response.json() as Promise<{ id: number }>,
    );

  console.log(`soak: ${MINUTES} min at ~${RATE} tasks/s; figures every minute`);
  const samples: { minute: number; rssMb: number; heapMb: number }[] = [];
  let order = 0;
  let created = 0;
  const started = Date.now();
  const deadline = started + MINUTES * 60_000;
  let nextSample = started + 60_000;
  try {
    while (Date.now() < deadline) {
      const tick = Date.now();
      const work: Promise<unknown>[] = [];
      for (let i = 0; i < RATE / 10; i++) {
        created++;
        const delayMs = 500 + Math.floor(Math.random() * 2500);
        if (created % 10 === 0) work.push(post({ type: 'webhook', payload: { url: hook, body: { n: created } }, delayMs, maxAttempts: 5 }));
        else if (created % 20 === 1) {
          work.push(
            post({ type: 'close_order', payload: { orderSn: `B${++order}` }, delayMs: 60_000 }).then(({ id }) =>
              fetch(`${server.baseUrl}/tasks/${id}/cancel`, { method: 'POST' }),
            ),
          );
        } else work.push(post({ type: 'close_order', payload: { orderSn: `B${++order}` }, delayMs }));
      }
      if (created % RATE < RATE / 10) work.push(fetch(`${server.baseUrl}/tasks/pending?limit=100`).then((response) => response.text()));
      await Promise.all(work);
      if (Date.now() >= nextSample || Date.now() >= deadline) {
        const metrics = await scrape(server);
        const minute = Math.round((Date.now() - started) / 60_000);
        const { rssMb } = memoryOf(server.child.pid!);
        const heapMb = (metrics.get('nodejs_heap_size_used_bytes') ?? 0) / 2 ** 20;
        const done = await db.count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done'");
        const pending = await db.count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'pending'");
        samples.push({ minute, rssMb, heapMb });
        console.log(
          `minute ${minute}: RSS ${rssMb.toFixed(1)} MB, heap ${heapMb.toFixed(1)} MB, armed ${metrics.get('punctual_armed_timers')}, ` +
            `done ${done}, pending ${pending}, webhook calls ${calls}`,
        );
        nextSample += 60_000;
      }
      await sleep(Math.max(0, 100 - (Date.now() - tick)));
    }
  } finally {
    await server.stop();
    receiver.close();
    await db.drop();
  }
  const steady = samples.filter((sample) => sample.minute > WARM_UP_MINUTES);
  if (steady.length >= 2) {
    const rss = slope(steady.map((sample) => [sample.minute, sample.rssMb])) * 60;
    const heap = slope(steady.map((sample) => [sample.minute, sample.heapMb])) * 60;
    console.log(
      `soak: after minute ${WARM_UP_MINUTES}, RSS slope ${rss.toFixed(2)} MB/hour, heap slope ${heap.toFixed(2)} MB/hour ` +
        `(RSS ${Math.min(...steady.map((s) => s.rssMb)).toFixed(1)}–${Math.max(...steady.map((s) => s.rssMb)).toFixed(1)} MB)`,
    );
  }
}

await main();
