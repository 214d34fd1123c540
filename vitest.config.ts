import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/bench/**', 'node_modules/**'],
    // The CLI tests run the build (dist/): rebuilt first when the source is newer.
    globalSetup: ['test/setup/build.ts'],
    // Hang guards, not speed limits: a run that takes 25 s on an idle machine takes several times
    // that on a loaded one (`npm run test:stress`). No test asserts on elapsed time.
    testTimeout: 180_000,
    hookTimeout: 180_000,
    // Runs journal in memory unless a test gives a store: tests run in parallel processes and must
    // not share (or leave behind) the working directory's .swarmstate/runs.db.
    env: { SWARMSTATE_STORE: 'memory' },
    // Fails the run when a test wrote the clone's own .swarmstate/ journal (tests leave nothing behind).
    globalSetup: ['test/globalSetup/journalUnchanged.ts'],
  },
});
