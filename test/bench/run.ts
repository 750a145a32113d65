/**
 * npm run bench [-- --quick] [-- --no-fsync] [-- --peers] [-- --no-hand-off] [-- --breakdown] [-- --startup] [-- --steps] [-- --streams] [-- --tenants]     BENCH_BATCH=N sets the claim/complete batch (default 200)
 *
 * --peers: also graphile-worker and pg-boss on the same server and work (peers.ts), a table with ratios,
 * and one SVG bar chart per figure in docs/bench/. --breakdown: only where a task's time goes (breakdown.ts). --steps:
 * only durable steps' record and replay and a usage report, beside a task without them (steps.ts). --tenants: only
 * fair share: claim latency at 100,000 READY across 1,000 tenants, and Jain's index of the tokens served (tenants.ts).
 *
 * Also: the compiled CLI's start-up beside `node -e ''` (startup.ts), disk per finished task and the claim's latency
 * during a prune (retention.ts), a 10,000-task DAG's submit and the claim beside it (large-dag.ts), the DAG list's pages at 100,000 DAGs (lists.ts), flat throughput behind a 100,000-task backlog, claim latency at 100,000
 * READY tasks with 90 % capability skew, and scheduling quality (makespan against
 * its lower bound, dagent's effective priority beside FIFO; makespan.ts).
 *
 * Throughput and latency of dagent's hot path on a fresh embedded PostgreSQL
 * (default, durable settings): flat claim → complete, chains whose every
 * completion unblocks the next task, the dependency hop latency, and the
 * agent runtime's dispatch and dependency latency (agent-latency.ts), a completion's refused, replayed and validated
 * paths one at a time with their statements (completion-paths.ts). Prints
 * figures; never asserts them (see docs/benchmarks.md).
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../src/db/open.js';
import type { Database } from '../../src/db/handle.js';
import { embeddedServerStart } from '../../src/db/embedded.js';
import type { TaskSpec } from '../../src/dag/spec.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { BATCH, analyze, fmt, pct, reset, submitChains, submitFlat, task, runAgent as agentLoop, type RunResult } from './workload.js';
import { agentLatency, httpLongPollDispatch } from './agent-latency.js';
import { cliStartup } from './startup.js';
import { retentionBench } from './retention.js';
import { largeDagBench } from './large-dag.js';
import { listsBench } from './lists.js';
import { idealMeanRatio, makespanBench } from './makespan.js';
import { GRAPHILE_LOCAL_QUEUE, graphileBench, pgBossBench } from './peers.js';
import { breakdownBench } from './breakdown.js';
import { completionPathsBench, statementCounter } from './completion-paths.js';
import { barChartSvg, plotWrite } from './plot.js';
import { streamsBench } from './streams.js';
import { durableStepsBench } from './steps.js';
import { tenantClaimLatency, tenantFairness } from './tenants.js';
import { serverCostDuring, serverCostText } from './server-cost.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { textArray } from '../../src/db/statement.js';

const quick = process.argv.includes('--quick');
const FLAT_TASKS = quick ? 4_000 : 20_000;
const CHAINS = quick ? 40 : 200;
const CHAIN_LENGTH = 50;
const EPHEMERAL = process.argv.includes('--no-fsync');
const PEERS = process.argv.includes('--peers');
/** --startup: only the CLI's start-up (startup.ts), on this Node and each in BENCH_NODES. */
const STARTUP_ONLY = process.argv.includes('--startup');
/** --steps: only durable steps (steps.ts). */
const STEPS_ONLY = process.argv.includes('--steps');
/** --streams: only streams, writer to reader (streams.ts). */
const STREAMS_ONLY = process.argv.includes('--streams');
/** --tenants: only fair share between tenants (tenants.ts). */
const TENANTS_ONLY = process.argv.includes('--tenants');
const STEP_TASKS = quick ? 100 : 500;
/** --no-hand-off: completions hand nothing on (each dependent goes READY and is claimed), in the bench loop and the runtime, for comparison. */
const HAND_OFF = !process.argv.includes('--no-hand-off');
const runAgent = (d: Database, slots: number, expected: number, batch = BATCH, hopsFromHandler = false): Promise<RunResult> =>
  agentLoop(d, slots, expected, batch, HAND_OFF, hopsFromHandler);
const LATENCY_TASKS = quick ? 100 : 500;
const BACKLOG = quick ? 20_000 : 100_000;
const MAKESPAN_INSTANCES = quick ? 10 : 50;
const LAYER_DAGS = quick ? 4 : 20;
const JOIN_WIDTH = quick ? 2_000 : 10_000;
const PRUNE_TASKS = quick ? 20_000 : 100_000;
const LIST_DAGS = quick ? 20_000 : 100_000;
const LARGE_DAG_TASKS = 10_000;
const LAYER_DEPTH = 5;
const LAYER_WIDTH = 100;


/**
 * Claim latency with `total` READY tasks, 90 % of which need a capability the
 * claimer lacks and are more urgent (the head of a priority-ordered walk).
 */
async function claimLatency(d: Database, total: number, claims: number, limit: number): Promise<number[]> {
  await submitFlat(d, total * 0.9, 5000, { requiredCapabilities: ['gpu'], priority: 10 });
  await submitFlat(d, total * 0.1, 5000, { requiredCapabilities: ['llm'], priority: 50 });
  await analyze(d);
  const agentId = `claimer-${limit}`;
  await agentRegister(d.db, { id: agentId, type: 'bench', capabilities: ['llm'], maxConcurrent: limit });
  const ms: number[] = [];
  for (let i = 0; i < claims; i++) {
    const t0 = performance.now();
    const got = await taskClaim(d.db, agentId, { limit, capabilities: ['llm'] });
    ms.push(performance.now() - t0);
    if (got.length !== limit) throw new Error(`claim ${i} got ${got.length} tasks`);
    // Off the clock: the agent finishes what it claimed, so like a real one it holds `limit` tasks at most.
    await d.db.execute(sql`update tasks set status = 'completed', completed_at = now() where id = any(${textArray(got.map((t) => t.id))})`);
  }
  return ms;
}

/**
 * Claim latency with `total` READY tasks spread over `keys` concurrency keys of limit 1 (in turn, so
 * every key's tasks are spread through the queue). The claimer holds what it claims, so each claim
 * makes one more key busy, and later claims walk past the busy keys' tasks to a free one.
 */
async function claimLatencyKeyed(d: Database, total: number, keys: number, claims: number): Promise<number[]> {
  const perDag = 5000;
  for (let i = 0; i < total / perDag; i++) {
    const tasks = Array.from({ length: perDag }, (_, j) => ({ ...task(`t${j}`), concurrency: { key: `k${(i * perDag + j) % keys}`, limit: 1 } }));
    await dagSubmit(d.db, [{ name: `keyed-${i}`, params: {}, tasks }]);
  }
  await analyze(d);
  const agentId = 'claimer-keyed';
  await agentRegister(d.db, { id: agentId, type: 'bench', capabilities: [], maxConcurrent: claims });
  const ms: number[] = [];
  for (let i = 0; i < claims; i++) {
    const t0 = performance.now();
    const got = await taskClaim(d.db, agentId, { limit: 1, capabilities: [] });
    ms.push(performance.now() - t0);
    if (got.length !== 1) throw new Error(`keyed claim ${i} got ${got.length} tasks`);
  }
  return ms;
}

/** Fan-out/fan-in: per DAG, a join task, then `depth` times `width` tasks after it and a join after them all. */
async function submitLayers(d: Database, dags: number, depth: number, width: number): Promise<number> {
  let total = 0;
  for (let g = 0; g < dags; g++) {
    const tasks: TaskSpec[] = [task('j0')];
    for (let l = 0; l < depth; l++) {
      const wide = Array.from({ length: width }, (_, w) => task(`w${l}-${w}`, [`j${l}`]));
      tasks.push(...wide, task(`j${l + 1}`, wide.map((t) => t.key)));
    }
    total += tasks.length;
    await dagSubmit(d.db, [{ name: `layers-${g}`, params: {}, tasks }]);
  }
  return total;
}

/** A fan-out of `width` tasks and one join after them all, in one DAG: what the submit and the run cost. */
async function joinRun(d: Database, width: number): Promise<{ submitSec: number; run: RunResult }> {
  const leaves = Array.from({ length: width }, (_, i) => task(`r${i}`));
  const t0 = performance.now();
  await dagSubmit(d.db, [{ name: 'join', params: {}, tasks: [...leaves, task('synthesis', leaves.map((l) => l.key))] }]);
  const submitSec = (performance.now() - t0) / 1000;
  await analyze(d);
  return { submitSec, run: await runAgent(d, 32, width + 1) };
}


const PLOTS = [
  { key: 'flat10', title: 'flat no-op throughput, 10 slots', unit: 'tasks/s' },
  { key: 'flat32', title: 'flat no-op throughput, 32 slots', unit: 'tasks/s' },
  // graphile-worker batched's own figure is flat32 at its local queue of 500: dagent's at that batch beside it.
  { key: 'flat32PeerBatch', title: `flat no-op throughput, 32 slots, dagent at batch ${GRAPHILE_LOCAL_QUEUE}`, unit: 'tasks/s' },
  // What the server does per flat task (32 slots; dagent at its batch): "Performance, third pass" item 1's two figures.
  { key: 'flatWalBytes', title: 'WAL per flat no-op task, 32 slots (the cluster\'s)', unit: 'bytes' },
  { key: 'flatServerCpuUs', title: 'PostgreSQL CPU per flat no-op task, 32 slots (all its processes)', unit: 'µs' },
  { key: 'flatBacklog', title: 'flat throughput behind a 100,000 backlog, 32 slots', unit: 'tasks/s' },
  { key: 'chains', title: 'DAG throughput: 200 chains x 50', unit: 'tasks/s' },
  { key: 'flowChains', title: 'DAG throughput: dagent chains vs pg-boss flow()', unit: 'tasks/s' },
  { key: 'flowLayers', title: 'fan-out/fan-in layers: dagent vs pg-boss flow()', unit: 'tasks/s' },
  { key: 'hopP50', title: 'dependency hop p50, idle (one chain)', unit: 'ms' },
  // What an agent feels: from the upstream's work done to the dependent running, with the write that releases the
  // dependent inside (dagent: the completion; the peers: the handler's addJob / send of the next job).
  { key: 'hopFromHandlerP50', title: 'dependency hop p50, idle, from the handler (the dependency write inside)', unit: 'ms' },
  { key: 'dispatchP50', title: 'idle dispatch p50 (submitted -> handler running)', unit: 'ms' },
  { key: 'dispatchP99', title: 'idle dispatch p99', unit: 'ms' },
] as const;

/** Run the peers on the same server and work, print a table with ratios, and write one SVG per figure. */
async function peersCompare(adminUrl: string, clusterDir: string, mine: Record<string, number>) {
  const sizes = {
    flat: FLAT_TASKS, backlog: BACKLOG, chains: CHAINS, chainLength: CHAIN_LENGTH, dispatch: quick ? 50 : 200,
    layerDags: LAYER_DAGS, layerDepth: LAYER_DEPTH, layerWidth: LAYER_WIDTH,
  };
  console.log('\npeers (same server, same work):');
  const peers = [...(await graphileBench(adminUrl, sizes, clusterDir)), await pgBossBench(adminUrl, sizes)];
  // pg-boss's flow() chains are compared with dagent's chains: the same work, its DAG mechanism.
  const dagent: { name: string; figures: Record<string, number | string> } = { name: 'dagent', figures: { flat32PeerBatch: mine.flat32!, ...mine, flowChains: mine.chains! } };
  // The peers' flat figure stands beside dagent's at either batch.
  for (const p of peers) p.figures.flat32PeerBatch = p.figures.flat32!;
  dagentOnlyPlots(mine);
  const all = [dagent, ...peers];
  const cell = (v: unknown) => (typeof v === 'number' ? (v >= 100 ? fmt(v) : v.toFixed(2)) : String(v ?? '-'));
  console.log(['figure', ...all.map((p) => p.name), ...peers.map((p) => `dagent ÷ ${p.name.split(' (')[0]}${p.name.includes('(') ? ` ${p.name.split('(')[1]!.replace(')', '')}` : ''}`)].join(' | '));
  for (const plot of PLOTS) {
    const values = all.map((p) => p.figures[plot.key] as number | undefined);
    const ratios = peers.map((p) => {
      const theirs = p.figures[plot.key] as number | undefined;
      const ours = dagent.figures[plot.key];
      return typeof theirs === 'number' && typeof ours === 'number' ? (ours / theirs).toFixed(2) : '-';
    });
    console.log([plot.title, ...values.map(cell), ...ratios].join(' | '));
    const file = plotWrite('docs/bench', plot.key, barChartSvg(`${plot.title} (${new Date().toISOString().slice(0, 10)})`, plot.unit,
      all.map((p) => ({ label: p.name, value: (p.figures[plot.key] as number | undefined) ?? NaN }))));
    console.log(`  plot: ${file}`);
  }
  console.log(`DAG chains ÷ dagent's own flat (32 slots): ${(mine.chains! / mine.flat32!).toFixed(2)} (target ≥ 0.6)`);
}

/** Charts of the figures only dagent has: claim latency under skew, and makespan against FIFO. */
function dagentOnlyPlots(mine: Record<string, number>) {
  const day = new Date().toISOString().slice(0, 10);
  plotWrite('docs/bench', 'claimP99', barChartSvg(`claim p99, ${fmt(BACKLOG)} READY, 90 % skew (${day})`, 'ms',
    [{ label: 'dagent, claim of 1', value: mine.claim1P99! }, { label: 'dagent, claim of 10', value: mine.claim10P99! }, { label: 'target', value: 10 }]));
  for (const family of ['layered', 'shorts-then-chain']) {
    plotWrite('docs/bench', `makespan-${family}`, barChartSvg(`makespan / lower bound, ${family} (${day})`, '×', [
      { label: 'dagent effective priority', value: mine[`makespan-${family}`]! }, { label: 'FIFO', value: mine[`fifo-${family}`]! },
      { label: 'target', value: 1.05 }, { label: 'lower bound', value: 1 },
    ]));
  }
}

/** Durable steps' record and replay beside a task without steps, one line each (printed as they come). */
async function stepLines(d: Database, counter: ReturnType<typeof statementCounter>): Promise<string[]> {
  const lines: string[] = [];
  for (const f of await durableStepsBench(d, counter, STEP_TASKS, 10)) {
    lines.push(`attempt calls, ${f.name}, one at a time (${fmt(f.ms.length)}): p50 ${pct(f.ms, 50).toFixed(2)} ms, p99 ${pct(f.ms, 99).toFixed(2)} ms, ${f.statements.toFixed(1)} statements`);
    console.log(lines.at(-1));
  }
  return lines;
}

async function main() {
  if (process.argv.includes('--breakdown')) {
    for (const line of await breakdownBench(quick, HAND_OFF)) console.log(line);
    return;
  }
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-bench-'));
  chmodSync(dataDir, 0o755);
  const server = await embeddedServerStart({ dataDir, database: 'bench', ephemeral: EPHEMERAL });
  const clusterDir = path.join(dataDir, 'pg');
  // Before the pool connects: its connections bind the driver's query method as they open.
  const counter = statementCounter();
  const d = await databaseOpen({ url: server.url, poolSize: 20 });
  const { rows } = await d.db.execute(sql`show server_version`);
  const pgVersion = (rows[0] as unknown as { server_version?: string })?.server_version;
  console.log(`dagent bench — ${new Date().toISOString()}`);
  console.log(`machine: ${os.cpus().length} × ${os.cpus()[0]?.model}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}, PostgreSQL ${pgVersion} (embedded, ${EPHEMERAL ? 'fsync off' : 'default durable settings'}), claim/complete batch ${BATCH}${quick ? ', QUICK sizes' : ''}\n`);
  const lines: string[] = [];
  const mine: Record<string, number> = {};
  if (STEPS_ONLY) {
    try {
      await stepLines(d, counter);
    } finally {
      await d.close();
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
    return;
  }
  if (STREAMS_ONLY) {
    try {
      for (const f of await streamsBench(d, server.url, counter, [50, 1000], quick ? 5 : 20)) {
        console.log(`stream, ${fmt(f.rate)} chunks/s written, read live by one reader (${fmt(f.chunks)} chunks): write to read p50 ${pct(f.ms, 50).toFixed(2)} ms, p99 ${pct(f.ms, 99).toFixed(2)} ms, ${f.statementsPerSec.toFixed(1)} statements/s (writer and reader)`);
      }
    } finally {
      await d.close();
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
    return;
  }
  if (TENANTS_ONLY) {
    try {
      const ms = await tenantClaimLatency(d, BACKLOG, 1000, quick ? 200 : 1000);
      console.log(`claim of 1 in fair-share order with ${fmt(BACKLOG)} READY across 1,000 tenants: p50 ${pct(ms, 50).toFixed(2)} ms, p99 ${pct(ms, 99).toFixed(2)} ms`);
      const idle = await tenantClaimLatency(d, BACKLOG, 100, quick ? 200 : 1000, 900);
      console.log(`claim of 1 in fair-share order with ${fmt(BACKLOG)} READY across 100 tenants, 900 more idle: p50 ${pct(idle, 50).toFixed(2)} ms, p99 ${pct(idle, 99).toFixed(2)} ms`);
      for (const weighted of [false, true]) {
        const f = await tenantFairness(d, 10, quick ? 20_000 : 100_000, 8, weighted);
        console.log(`fair share, 10 tenants (tasks of 250 to 2,500 tokens, weights ${weighted ? '1 to 4' : 'equal'}), 8 claimers of 1: Jain's index of tokens served per weight ${f.jain.toFixed(4)} while all had work (${fmt(f.tasks)} tasks in ${f.seconds.toFixed(1)} s)`);
      }
    } finally {
      await d.close();
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
    return;
  }
  if (STARTUP_ONLY) {
    try {
      for (const line of cliStartup(server.url, quick ? 5 : 15)) console.log(line);
    } finally {
      await d.close();
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
    return;
  }
  try {
    for (const slots of [10, 32]) {
      await reset(d);
      await submitFlat(d, FLAT_TASKS);
      await analyze(d);
      const { result: r, cost } = await serverCostDuring(server.url, clusterDir, FLAT_TASKS, () => runAgent(d, slots, FLAT_TASKS));
      mine[`flat${slots}`] = r.tasks / r.seconds;
      if (slots === 32) [mine.flatWalBytes, mine.flatServerCpuUs] = [cost.walBytesPerTask, cost.cpuUsPerTask];
      lines.push(`flat ${fmt(FLAT_TASKS)} no-op tasks, ${slots} slots: ${fmt(r.tasks / r.seconds)} tasks/s (${r.seconds.toFixed(2)} s); per task: ${serverCostText(cost)}`);
      console.log(lines.at(-1));
    }
    // Like with like: graphile-worker batched takes jobs GRAPHILE_LOCAL_QUEUE at a time; dagent's flat at that batch too.
    if (BATCH !== GRAPHILE_LOCAL_QUEUE) {
      await reset(d);
      await submitFlat(d, FLAT_TASKS);
      await analyze(d);
      const { result: r, cost } = await serverCostDuring(server.url, clusterDir, FLAT_TASKS, () => runAgent(d, 32, FLAT_TASKS, GRAPHILE_LOCAL_QUEUE));
      mine.flat32PeerBatch = r.tasks / r.seconds;
      lines.push(`flat ${fmt(FLAT_TASKS)} no-op tasks, 32 slots, claim/complete batch ${GRAPHILE_LOCAL_QUEUE} (graphile-worker batched's local queue): ${fmt(mine.flat32PeerBatch)} tasks/s (${r.seconds.toFixed(2)} s); per task: ${serverCostText(cost)}`);
      console.log(lines.at(-1));
    }
    await reset(d);
    await submitFlat(d, BACKLOG, 5000, { priority: 60 });
    await submitFlat(d, FLAT_TASKS);
    await analyze(d);
    const behind = await runAgent(d, 32, FLAT_TASKS);
    mine.flatBacklog = behind.tasks / behind.seconds;
    lines.push(`flat ${fmt(FLAT_TASKS)} no-op tasks behind a ${fmt(BACKLOG)}-task READY backlog, 32 slots: ${fmt(behind.tasks / behind.seconds)} tasks/s (${behind.seconds.toFixed(2)} s)`);
    console.log(lines.at(-1));
    for (const limit of [1, 10]) {
      await reset(d);
      const ms = await claimLatency(d, BACKLOG, quick ? 200 : 1000, limit);
      mine[`claim${limit}P99`] = pct(ms, 99);
      lines.push(`claim of ${limit} with ${fmt(BACKLOG)} READY, 90 % needing a capability the claimer lacks (and more urgent): p50 ${pct(ms, 50).toFixed(2)} ms, p99 ${pct(ms, 99).toFixed(2)} ms`);
      console.log(lines.at(-1));
    }
    {
      await reset(d);
      const claims = quick ? 200 : 1000;
      const ms = await claimLatencyKeyed(d, BACKLOG, 1000, claims);
      mine.claimKeyedP99 = pct(ms, 99);
      lines.push(`claim of 1 with ${fmt(BACKLOG)} READY under 1,000 concurrency keys (limit 1 each; the claimer holds what it claims, up to ${fmt(claims)} busy keys): p50 ${pct(ms, 50).toFixed(2)} ms, p99 ${pct(ms, 99).toFixed(2)} ms`);
      console.log(lines.at(-1));
    }
    await reset(d);
    await submitChains(d, CHAINS, CHAIN_LENGTH);
    await analyze(d);
    const chains = await runAgent(d, 32, CHAINS * CHAIN_LENGTH);
    mine.chains = chains.tasks / chains.seconds;
    mine.chainHopP50 = pct(chains.hopsMs, 50);
    lines.push(`chains ${CHAINS} × ${CHAIN_LENGTH}, 32 slots: ${fmt(chains.tasks / chains.seconds)} tasks/s (${chains.seconds.toFixed(2)} s); hop under load p50 ${pct(chains.hopsMs, 50).toFixed(2)} ms, p95 ${pct(chains.hopsMs, 95).toFixed(2)} ms`);
    console.log(lines.at(-1));
    await reset(d);
    const join = await joinRun(d, JOIN_WIDTH);
    lines.push(`join of ${fmt(JOIN_WIDTH)} (one DAG: ${fmt(JOIN_WIDTH)} tasks, then one that depends on them all), 32 slots: submit ${join.submitSec.toFixed(2)} s; run ${fmt((JOIN_WIDTH + 1) / join.run.seconds)} tasks/s (${join.run.seconds.toFixed(2)} s)`);
    console.log(lines.at(-1));
    {
      await reset(d);
      const big = await largeDagBench(d, server.url, LARGE_DAG_TASKS, quick ? 2 : 5, task);
      [mine.largeSubmitSec, mine.largeClaimP99] = [pct(big.submitSec, 50), pct(big.claimsDuring, 99)];
      lines.push(`DAG of ${fmt(big.tasks)} tasks and ${fmt(big.edges)} edges (10 layers), one submit with its cycle check: p50 ${pct(big.submitSec, 50).toFixed(2)} s, worst ${Math.max(...big.submitSec).toFixed(2)} s of ${big.submitSec.length}; claim of 1 in the same process meanwhile p50 ${pct(big.claimsDuring, 50).toFixed(2)} ms, p99 ${pct(big.claimsDuring, 99).toFixed(2)} ms, max ${Math.max(...big.claimsDuring).toFixed(1)} ms (${big.claimsDuring.length} claims; without it p50 ${pct(big.claimsIdle, 50).toFixed(2)} ms, p99 ${pct(big.claimsIdle, 99).toFixed(2)} ms)`);
      console.log(lines.at(-1));
      mine.largeClaimOtherProcessP99 = pct(big.claimsDuringOtherProcess, 99);
      lines.push(`the same submits with the claimer in a process of its own (an agent on another node): submit p50 ${pct(big.otherProcessSubmitSec, 50).toFixed(2)} s; claim of 1 meanwhile p50 ${pct(big.claimsDuringOtherProcess, 50).toFixed(2)} ms, p99 ${pct(big.claimsDuringOtherProcess, 99).toFixed(2)} ms, max ${Math.max(...big.claimsDuringOtherProcess).toFixed(1)} ms (${big.claimsDuringOtherProcess.length} claims)`);
      console.log(lines.at(-1));
    }
    await reset(d);
    const layered = await submitLayers(d, LAYER_DAGS, LAYER_DEPTH, LAYER_WIDTH);
    await analyze(d);
    const fan = await runAgent(d, 32, layered);
    mine.layers = fan.tasks / fan.seconds;
    mine.flowLayers = mine.layers;
    lines.push(`fan-out/fan-in ${LAYER_DAGS} DAGs × ${LAYER_DEPTH} layers of ${LAYER_WIDTH} between joins (${fmt(layered)} tasks), 32 slots: ${fmt(mine.layers)} tasks/s (${fan.seconds.toFixed(2)} s)`);
    console.log(lines.at(-1));
    await reset(d);
    await submitChains(d, 1, 200);
    const single = await runAgent(d, 1, 200, 1, true);
    mine.hopP50 = pct(single.hopsMs, 50);
    mine.hopFromHandlerP50 = pct(single.hopsFromHandlerMs, 50);
    lines.push(`single chain of 200, 1 slot: dependency hop (upstream's completion written → dependent taken, as graphile-worker's is measured from its addJob committed) p50 ${pct(single.hopsMs, 50).toFixed(2)} ms, p95 ${pct(single.hopsMs, 95).toFixed(2)} ms; from the upstream's handler returning (the completion's write inside) p50 ${pct(single.hopsFromHandlerMs, 50).toFixed(2)} ms, p95 ${pct(single.hopsFromHandlerMs, 95).toFixed(2)} ms`);
    console.log(lines.at(-1));
    await reset(d);
    const lat = await agentLatency(d, LATENCY_TASKS, task, HAND_OFF);
    const ms = (xs: number[]) => `p50 ${pct(xs, 50).toFixed(2)} ms, p95 ${pct(xs, 95).toFixed(2)} ms, p99 ${pct(xs, 99).toFixed(2)} ms`;
    [mine.dispatchP50, mine.dispatchP95, mine.dispatchP99] = [pct(lat.dispatchMs, 50), pct(lat.dispatchMs, 95), pct(lat.dispatchMs, 99)];
    mine.runtimeHopP50 = pct(lat.dependencyMs, 50);
    lines.push(`agent runtime, idle agent (30 s poll), ${LATENCY_TASKS} tasks: dispatch (submitted → handler running) ${ms(lat.dispatchMs)}`);
    console.log(lines.at(-1));
    lines.push(`agent runtime, chain of ${LATENCY_TASKS}: dependency (upstream completed → dependent claimed) ${ms(lat.dependencyMs)}`);
    console.log(lines.at(-1));
    mine.runtimeHandlerHopP50 = pct(lat.handlerHopMs, 50);
    lines.push(`agent runtime, chain of ${LATENCY_TASKS}: handler to handler (upstream's handler returned → dependent's running, process clock) ${ms(lat.handlerHopMs)}`);
    console.log(lines.at(-1));
    const httpMs = await httpLongPollDispatch(d, LATENCY_TASKS, task);
    mine.httpDispatchP50 = pct(httpMs, 50);
    lines.push(`HTTP agent long-polling (wait_sec), ${LATENCY_TASKS} tasks: dispatch (submitted → claim answered) ${ms(httpMs)}; ÷ agent runtime's p50: ${(pct(httpMs, 50) / mine.dispatchP50!).toFixed(2)} (target ≤ 2)`);
    console.log(lines.at(-1));
    await reset(d);
    for (const p of await completionPathsBench(d, counter, quick ? 100 : 500)) {
      lines.push(`a completion, ${p.name}, one at a time: p50 ${p.p50Ms.toFixed(2)} ms, p90 ${p.p90Ms.toFixed(2)} ms, ${p.statements.toFixed(1)} statements`);
      console.log(lines.at(-1));
    }
    await reset(d);
    for (const line of await stepLines(d, counter)) lines.push(line);
    for (const family of ['layered', 'shorts-then-chain'] as const) {
      const [ours, fifo] = [await makespanBench(d, family, 'dagent', MAKESPAN_INSTANCES, HAND_OFF), await makespanBench(d, family, 'fifo', MAKESPAN_INSTANCES, HAND_OFF)];
      mine[`makespan-${family}`] = ours.meanRatio;
      mine[`fifo-${family}`] = fifo.meanRatio;
      mine[`makespanHopP50-${family}`] = pct(ours.hopMs, 50);
      lines.push(`makespan / lower bound, ${family}, ${MAKESPAN_INSTANCES} instances, 8 agents: dagent ${ours.meanRatio.toFixed(3)} (worst ${ours.maxRatio.toFixed(2)}), FIFO ${fifo.meanRatio.toFixed(3)} (worst ${fifo.maxRatio.toFixed(2)}); the same orders with no overhead (an ideal list schedule): dagent ${idealMeanRatio(family, 'dagent', MAKESPAN_INSTANCES).toFixed(3)}, FIFO ${idealMeanRatio(family, 'fifo', MAKESPAN_INSTANCES).toFixed(3)}; overhead per hop (a dependent's start after its last upstream completed and its agent was free) dagent p50 ${pct(ours.hopMs, 50).toFixed(1)} ms, FIFO ${pct(fifo.hopMs, 50).toFixed(1)} ms; the handlers' sleeps overran their durations by ${(ours.sleepOverrun * 100).toFixed(1)} % of the work (the bench's timers, not dagent)`);
      console.log(lines.at(-1));
    }
    {
      await reset(d);
      const r = await retentionBench(d, PRUNE_TASKS, { task, runAgent, analyze });
      mine.pruneClaimP99 = pct(r.claimsDuring, 99);
      lines.push(`disk per finished no-op task (chains of 10; tables, indexes and TOAST after vacuum): ${fmt(r.bytesPerTask)} bytes, ${(r.bytesPerTask * 1e6 / 2 ** 30).toFixed(2)} GiB per million`);
      console.log(lines.at(-1));
      lines.push(`disk per kept log line (a 120-character message and two fields; 20 lines an attempt): ${fmt(r.bytesPerLogLine)} bytes`);
      console.log(lines.at(-1));
      lines.push(`prune of ${fmt(PRUNE_TASKS)} finished tasks: ${r.pruneSeconds.toFixed(2)} s (${fmt(PRUNE_TASKS / r.pruneSeconds)} tasks/s); claim of 1 beside it p50 ${pct(r.claimsDuring, 50).toFixed(2)} ms, p99 ${pct(r.claimsDuring, 99).toFixed(2)} ms (${r.claimsDuring.length} claims; without it p50 ${pct(r.claimsIdle, 50).toFixed(2)} ms, p99 ${pct(r.claimsIdle, 99).toFixed(2)} ms)`);
      console.log(lines.at(-1));
    }
    await reset(d);
    for (const f of await listsBench(d, LIST_DAGS)) {
      lines.push(`lists at ${fmt(LIST_DAGS)} DAGs, page of 50, ${f.name}: p50 ${pct(f.ms, 50).toFixed(2)} ms, p99 ${pct(f.ms, 99).toFixed(2)} ms`);
      console.log(lines.at(-1));
    }
    for (const line of cliStartup(server.url, quick ? 5 : 15)) {
      lines.push(line);
      console.log(line);
    }
    if (PEERS) await peersCompare(server.url, clusterDir, mine);
  } finally {
    await d.close();
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
process.exit(0);
