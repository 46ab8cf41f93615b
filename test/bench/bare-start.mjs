/**
 * B0's yardstick: the least a Fastify + mysql2 service does to be ready. It connects to
 * DATABASE_URL, asks `SELECT 1`, and listens on PORT with a /readyz that answers 200. Plain
 * JavaScript, run by node as it is, so its start is Node's, Fastify's and mysql2's alone.
 */
import Fastify from 'fastify';
import mysql from 'mysql2/promise';

const conn = await mysql.createConnection({ uri: process.env.DATABASE_URL });
await conn.query('SELECT 1');
const app = Fastify();
app.get('/readyz', async () => ({ ready: true }));
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) });
const stop = () => void app.close().then(() => conn.end()).then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
