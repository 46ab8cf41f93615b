import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Process tests spend their time waiting on child servers and timers, not on the CPU.
    maxWorkers: 4,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Fixed zone for the test process itself, so a test that passes here passes anywhere.
    env: { TZ: 'UTC' },
  },
});
