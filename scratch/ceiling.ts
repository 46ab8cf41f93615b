import Fastify from 'fastify';
import autocannon from 'autocannon';
const app = Fastify({ logger: false });
app.post('/tasks', async (req, reply) => reply.status(201).send({ id: 1, ...(req.body as object) }));
await app.listen({ port: 3977 });
const result = await autocannon({ url: 'http://127.0.0.1:3977/tasks', method: 'POST', connections: 50, duration: 8, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'close_order', payload: { orderSn: 'x' }, delayMs: 3600000 }) });
console.log('ceiling req/s', result.requests.average, 'p99', result.latency.p99);
await app.close();
