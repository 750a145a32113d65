import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

/**
 * The compiled CLI's start-up, as a user runs it (`node bin/dagent.js`, what `npx dagent` runs), beside
 * `node -e ''`: the floor no Node program starts under on this machine. Wall time of whole processes,
 * median of `runs` after one warm-up. `submit` sends a two-task DAG to the bench's running database.
 */
export function cliStartup(databaseUrl: string, runs: number): string[] {
  if (!existsSync('dist/cli/dagent.js')) return ['CLI start-up: skipped, dagent is not built (npm run build)'];
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-startup-'));
  const file = path.join(dir, 'two.yaml');
  writeFileSync(file, 'name: startup\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');
  const env = { ...process.env, DATABASE_URL: databaseUrl, DAGENT_LOG_LEVEL: 'warn' };
  const median = (argv: string[]) => {
    const ms: number[] = [];
    for (let i = 0; i <= runs; i++) {
      const t0 = performance.now();
      const r = spawnSync(process.execPath, argv, { env, encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`${argv.join(' ')} exited ${r.status}: ${r.stderr}`);
      if (i > 0) ms.push(performance.now() - t0);
    }
    return ms.sort((a, b) => a - b)[Math.floor(ms.length / 2)]!;
  };
  try {
    const floor = median(['-e', '']);
    const help = median(['bin/dagent.js', '--help']);
    const validate = median(['bin/dagent.js', 'validate', file]);
    const submit = median(['bin/dagent.js', 'submit', file]);
    const row = (what: string, ms: number) => `CLI start-up, ${what}: ${ms.toFixed(0)} ms (${(ms / floor).toFixed(2)} × node -e '')`;
    return [
      `CLI start-up, node -e '' (the floor): ${floor.toFixed(0)} ms, median of ${runs}`,
      row('dagent --help', help),
      row('dagent validate (two tasks, no database)', validate),
      row('dagent submit (two tasks, to the running database)', submit),
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
