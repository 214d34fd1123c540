import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/bench/**', 'node_modules/**'],
    // Hang guards, not speed limits: a run that takes 25 s on an idle machine takes several times
    // that on a loaded one (`npm run test:stress`). No test asserts on elapsed time.
    testTimeout: 180_000,
    hookTimeout: 180_000,
    // Runs journal in memory unless a test gives a store: tests run in parallel processes and must
    // not share (or leave behind) the working directory's .swarmstate/runs.db.
    env: { SWARMSTATE_STORE: 'memory' },
    // build.ts: the CLI tests run the build (dist/), rebuilt first when the source is newer.
    // journalUnchanged.ts: fails the run when a test wrote the clone's own .swarmstate/ journal
    // (tests leave nothing behind).
    globalSetup: ['test/setup/build.ts', 'test/setup/journalUnchanged.ts'],
  },
});
