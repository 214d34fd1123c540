import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/bench/**', 'node_modules/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Runs journal in memory unless a test gives a store: tests run in parallel processes and must
    // not share (or leave behind) the working directory's .swarmstate/runs.db.
    env: { SWARMSTATE_STORE: 'memory' },
  },
});
