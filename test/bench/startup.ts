import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

/** A Node to start the CLI with: its binary, and whether its compile cache is on (Node 22.1+; bin/dagent.js enables it). */
interface Runtime { label: string; node: string; env: NodeJS.ProcessEnv }

/**
 * The Nodes to compare: this one, and each binary in BENCH_NODES (colon-separated paths, e.g. the Node 24 that
 * .ci/run installs in .ci/.node/24/…/bin/node). A Node with a compile cache runs twice, with the cache off
 * (NODE_DISABLE_COMPILE_CACHE) and on (a fresh folder, filled by the warm-up run).
 */
function runtimes(cacheRoot: string): Runtime[] {
  const nodes = [process.execPath, ...(process.env.BENCH_NODES ?? '').split(':').filter(Boolean)];
  return nodes.flatMap((node, i) => {
    const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();
    const [major, minor] = version.slice(1).split('.').map(Number) as [number, number];
    if (major < 22 || (major === 22 && minor < 1)) return [{ label: `Node ${version}`, node, env: {} }];
    return [
      { label: `Node ${version}, no compile cache`, node, env: { NODE_DISABLE_COMPILE_CACHE: '1' } },
      { label: `Node ${version}, compile cache`, node, env: { NODE_COMPILE_CACHE: path.join(cacheRoot, String(i)) } },
    ];
  });
}

/**
 * The compiled CLI's start-up, as a user runs it (`dagent …`: node_modules/.bin/dagent is bin/dagent.js), beside
 * `node -e ''`: the floor no Node program starts under on this machine. Wall time of whole processes, median of
 * `runs` after one warm-up, each Node in turn within every run (alternating, so a busy moment falls on all of
 * them). `submit` sends a two-task DAG to the bench's running database.
 */
export function cliStartup(databaseUrl: string, runs: number): string[] {
  if (!existsSync('dist/cli/dagent.js')) return ['CLI start-up: skipped, dagent is not built (npm run build)'];
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-startup-'));
  const file = path.join(dir, 'two.yaml');
  writeFileSync(file, 'name: startup\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');
  const commands: Array<[string, string[]]> = [
    ["node -e '' (the floor)", ['-e', '']],
    ['dagent --help', ['bin/dagent.js', '--help']],
    ['dagent validate (two tasks, no database)', ['bin/dagent.js', 'validate', file]],
    ['dagent submit (two tasks, to the running database)', ['bin/dagent.js', 'submit', file]],
  ];
  try {
    const rts = runtimes(dir);
    const ms = rts.map(() => commands.map((): number[] => []));
    for (let i = 0; i <= runs; i++) {
      rts.forEach((rt, r) => commands.forEach(([, argv], c) => {
        const env = { ...process.env, DATABASE_URL: databaseUrl, DAGENT_LOG_LEVEL: 'warn', NODE_COMPILE_CACHE: undefined, ...rt.env };
        const t0 = performance.now();
        const run = spawnSync(rt.node, argv, { env, encoding: 'utf8' });
        if (run.status !== 0) throw new Error(`${rt.label}: ${argv.join(' ')} exited ${run.status}: ${run.stderr}`);
        if (i > 0) ms[r]![c]!.push(performance.now() - t0);
      }));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    return rts.flatMap((rt, r) => {
      const floor = median(ms[r]![0]!);
      return commands.map(([what], c) => c === 0
        ? `CLI start-up, ${rt.label}, ${what}: ${floor.toFixed(0)} ms, median of ${runs}`
        : `CLI start-up, ${rt.label}, ${what}: ${median(ms[r]![c]!).toFixed(0)} ms (${(median(ms[r]![c]!) / floor).toFixed(2)} × node -e '')`);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
