/**
 * Once per `npm test`: make sure MariaDB/MySQL answers, drop test databases that crashed runs
 * left behind, and build dist/ (the code and the dashboard's files) for the tests that start the
 * real server as a child process, when it is missing or older than src/. A dist/ that is up to
 * date is left alone: a second run in the same checkout must not empty the dist/ a first run's
 * servers are starting from.
 */
import { execFileSync } from 'node:child_process';
import mysql from 'mysql2/promise';
import { SERVER_URL, STALE_AFTER_S, testDatabaseAge } from './helpers/db.js';

export default async function setup(): Promise<void> {
  let conn: mysql.Connection;
  try {
    conn = await mysql.createConnection({ uri: SERVER_URL, connectTimeout: 5000 });
  } catch (error) {
    throw new Error(`the tests need MySQL or MariaDB at ${SERVER_URL} (set TEST_MYSQL_URL): ${(error as Error).message}`, {
      cause: error,
    });
  }
  try {
    const [rows] = await conn.query<mysql.RowDataPacket[]>("SHOW DATABASES LIKE 'punctual\\_test\\_%'");
    for (const row of rows) {
      const name = String(Object.values(row)[0]);
      const age = testDatabaseAge(name);
      if (age !== undefined && age > STALE_AFTER_S) await conn.query(`DROP DATABASE \`${name}\``);
    }
  } finally {
    await conn.end();
  }
  // chromium, promtool and libfaketime: installed with apt when missing, so `npm test` passes on a fresh machine.
  execFileSync('scripts/ensure-test-tools.sh', { stdio: 'inherit' });
  // Redis, RabbitMQ and NATS for the delivery targets' tests: started when one does not answer.
  execFileSync('scripts/ensure-services.sh', { stdio: 'inherit' });
  execFileSync(process.execPath, ['scripts/ensure-build.mjs'], { stdio: 'inherit' });
}
