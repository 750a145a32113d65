import type { Reporter, TestModule } from 'vitest/node';

/** How many of the slowest test files a run names at its end, so a file that became slow is seen. */
const SLOWEST = 10;

/** Names the slowest test files at the end of a run, with how long each took (its tests, hooks and collection). */
export default class SlowestFiles implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const timed = modules.map((m) => {
      const d = m.diagnostic();
      return { file: m.moduleId.replace(`${process.cwd()}/`, ''), ms: d.duration + d.collectDuration + d.setupDuration };
    }).sort((a, b) => b.ms - a.ms).slice(0, SLOWEST);
    if (timed.length === 0) return;
    const lines = timed.map((t) => `  ${(t.ms / 1000).toFixed(1).padStart(6)} s  ${t.file}`);
    process.stdout.write(`\nSlowest ${timed.length} test files:\n${lines.join('\n')}\n`);
  }
}
