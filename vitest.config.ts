import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // The default report, then the slowest files (a file that became slow is seen at the end of every run).
    reporters: ['default', './test/helpers/slowest-files.ts'],
    // `dagent up` processes the tests start check every JSON answer against its route's response schema (src/http/route.ts).
    env: { DAGENT_CHECK_RESPONSES: '1' },
  },
});
