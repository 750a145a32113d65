import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Files that run after the others, one at a time, with the machine to themselves: each holds a bound on latency
 * that other files' load on 2 cores would break without anything being wrong (/healthz within 2 s while a large DAG
 * parses; a revocation reaching every stream within its bound; a browser drawing 3,000-task DAGs within its waits,
 * which timed out twice in a full pass beside two other files once the suite had doubled its CPU work).
 */
const ALONE = [
  'test/security/large-submissions.test.ts',
  'test/security/revocation.test.ts',
  'test/http/dashboard.browser.test.ts',
];

/**
 * Test files at once: one more than the cores. Vitest's default (one fewer) ran a single file at a time on 2 cores;
 * one per core left a core idle while a file waited on PostgreSQL or on processes it started; once the suite's
 * fixed waits were cut, three files at a time on 2 cores finished a pass in 352 s against 389 s for two, and four
 * (before the cuts) were slower (docs/benchmarks.md, "The test suite"). DAGENT_TEST_WORKERS overrides it.
 */
const WORKERS = Number(process.env.DAGENT_TEST_WORKERS) || availableParallelism() + 1;

/**
 * Files a run leaves out (comma-separated globs, DAGENT_TEST_EXCLUDE): .ci/run's second pass leaves the packed
 * package's to its third. (Vitest's --exclude does not reach a project whose config sets its own exclude.)
 */
const EXCLUDED = (process.env.DAGENT_TEST_EXCLUDE ?? '').split(',').map((g) => g.trim()).filter(Boolean);

export default defineConfig({
  test: {
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: WORKERS,
    minWorkers: 1,
    // The default report, then the slowest files (a file that became slow is seen at the end of every run).
    reporters: ['default', './test/helpers/slowest-files.ts'],
    // `dagent up` processes the tests start check every JSON answer against its route's response schema (src/http/route.ts).
    env: { DAGENT_CHECK_RESPONSES: '1' },
    projects: [
      { extends: true, test: { name: 'together', include: ['test/**/*.test.ts'], exclude: [...ALONE, ...EXCLUDED], sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'alone', include: ALONE, sequence: { groupOrder: 1 }, poolOptions: { forks: { singleFork: true } } } },
    ],
  },
});
