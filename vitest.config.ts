import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // The test process's own zone is fixed; the servers under test get whatever zone a test gives them.
    env: { TZ: 'UTC' },
    projects: [
      {
        extends: true,
        test: {
          name: 'in-process',
          include: ['test/{unit,integration}/**/*.test.ts'],
          maxWorkers: 3,
          sequence: { groupOrder: 0 },
        },
      },
      {
        // Real servers, faults and load on MariaDB: one file at a time, so their timing holds.
        // test/chaos runs small here; `npm run test:chaos` runs it full size.
        extends: true,
        test: {
          name: 'process',
          include: ['test/process/**/*.test.ts', 'test/chaos/**/*.test.ts', 'test/browser/**/*.test.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
      {
        // Firing precision is measured on a quiet machine: alone, after everything else.
        extends: true,
        test: {
          name: 'timing',
          include: ['test/timing/**/*.test.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
