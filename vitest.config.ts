import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // The test process's own zone is fixed; the servers under test get whatever zone a test gives them.
    env: { TZ: 'UTC' },
    projects: [
      {
        extends: true,
        test: {
          name: 'main',
          include: ['test/{unit,integration,process}/**/*.test.ts'],
          // Process tests spend their time waiting on child servers and timers, not on the CPU.
          maxWorkers: 3,
          sequence: { groupOrder: 0 },
        },
      },
      {
        // Firing precision is measured on a quiet machine: alone, after everything else.
        extends: true,
        test: {
          name: 'timing',
          include: ['test/timing/**/*.test.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
