import { defineConfig } from 'vitest/config';

/**
 * `npm run test:cluster`: punctual on a three-node Galera cluster on this host (scripts/cluster.sh),
 * apart from `npm test`. The global setup brings the cluster up (or reuses one that runs) and
 * takes it down afterwards when it started it.
 */
export default defineConfig({
  test: {
    include: ['test/cluster/**/*.test.ts'],
    globalSetup: ['test/cluster/global-setup.ts'],
    setupFiles: ['test/setup.ts', 'test/cluster/whole-cluster.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 300_000,
    env: { TZ: 'UTC', TEST_MYSQL_URL: 'mysql://root@127.0.0.1:33061' },
  },
});
