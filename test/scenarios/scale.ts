/**
 * npm run scale [-- --nodes 3] [-- --agents 1000] [-- --tasks 100000] [-- --rate 200] [-- --dag-size 100] [-- --max-sec 900] [-- --idle-sec 20] [-- --no-faults] [-- --ephemeral] [-- --profile DIR]
 *
 * A fleet on loopback, bounded in time (submitting stops at 60 % of --max-sec, and what was submitted has until
 * --max-sec to complete): N `dagent up` nodes (the compiled CLI,
 * built first) on one embedded PostgreSQL, M simulated HTTP agents long-polling them round robin (each task takes
 * 0.2–2 s, reports a cost), and fan-out DAGs (a root, the rest in parallel, a join) with budgets, submitted through
 * the nodes at a steady rate (agents heartbeat every 30 s; the Python agent does every 10 s). Mid-run, one node is killed (SIGKILL) and, later, PostgreSQL is restarted. An agent
 * whose node does not answer goes to the next one, as behind a load balancer, and retries its report with the same
 * fence.
 *
 * PostgreSQL keeps its durable settings (fsync on) unless --ephemeral.
 *
 * Before any work is submitted, the fleet idles for --idle-sec with every agent long-polling: what each waiting agent
 * costs its node in memory and sockets, and the CPU the idle fleet takes (long polls expire and are renewed), so a
 * deployment can be sized from them.
 *
 * Prints throughput, dispatch (READY to claimed) p50/p99, connections held at PostgreSQL, CPU of PostgreSQL and per node, how long the
 * loops took to leave the killed node and how long completions stopped across the restart; then checks that every
 * task completed, none twice, and no DAG spent past its budget. Exits 1 when a check fails. Not part of `npm test`.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, chmodSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../src/db/open.js';
import { embeddedServerStart, type EmbeddedServer } from '../../src/db/embedded.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { percentile } from './percentile.js';
import { cpuSeconds, serverCpuSeconds } from '../helpers/proc.js';

const arg = (flag: string, fallback: number) => { const i = process.argv.indexOf(flag); return i < 0 ? fallback : Number(process.argv[i + 1]); };
const NODES = arg('--nodes', 3);
const AGENTS = arg('--agents', 1000);
const TASKS = arg('--tasks', 100_000);
const RATE = arg('--rate', 200);
const MAX_SEC = arg('--max-sec', 900);
const DAG_SIZE = arg('--dag-size', 100);
const IDLE_SEC = arg('--idle-sec', 20);
const FAULTS = !process.argv.includes('--no-faults');
/** fsync and the other durability settings off, as the test clusters run; by default the server is durable, as in production. */
const EPHEMERAL = process.argv.includes('--ephemeral');
/** --profile DIR: each node writes a CPU profile there (node --cpu-prof), and pg_stat_statements' top statements are printed. */
const PROFILE_DIR = process.argv.includes('--profile') ? path.resolve(process.argv[process.argv.indexOf('--profile') + 1]!) : undefined;
const TASK_COST = 0.001;
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

interface Node { i: number; child: ChildProcess; url: string; alive: boolean; cpuSec: number }

/** A process's resident memory (KiB) and open sockets, from /proc. */
function memoryAndSockets(pid: number): { rssKb: number; sockets: number } {
  const rssKb = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
  let sockets = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try { if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) sockets++; } catch { /* closed meanwhile */ }
  }
  return { rssKb, sockets };
}

async function nodeStart(i: number, databaseUrl: string): Promise<Node> {
  const child = spawn(process.execPath, [...(PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-dir', PROFILE_DIR] : []), path.join(ROOT, 'bin/dagent.js'), 'up'], {
    cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, DATABASE_URL: databaseUrl, DAGENT_HTTP_PORT: '0', DAGENT_RETENTION: 'off', DAGENT_LOG_LEVEL: 'warn', DAGENT_DB_POOL: '10' },
  });
  let out = '';
  child.stdout!.on('data', (b) => (out += b));
  child.stderr!.on('data', (b) => (out += b));
  if (process.env.SCALE_NODE_LOGS) child.stderr!.on('data', (b) => appendFileSync(`${process.env.SCALE_NODE_LOGS}.${i}`, b));
  for (let t = 0; t < 300; t++) {
    const url = /on (http:\/\/\S+)\//.exec(out)?.[1];
    if (url) return { i, child, url, alive: true, cpuSec: 0 };
    if (child.exitCode !== null) throw new Error(`node ${i} exited: ${out}`);
    await sleep(100);
  }
  throw new Error(`node ${i} did not start: ${out}`);
}


async function main() {
  console.log('building the CLI …');
  execFileSync(process.execPath, [path.join(ROOT, 'scripts/build.mjs')], { cwd: ROOT, stdio: 'ignore' });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-scale-'));
  chmodSync(dataDir, 0o755);
  let server: EmbeddedServer = await embeddedServerStart({ dataDir, database: 'scale', ephemeral: EPHEMERAL });
  if (PROFILE_DIR) {
    // pg_stat_statements must be preloaded: set, then restart once before anything runs.
    const c = await databaseOpen({ url: server.url, poolSize: 1, migrate: false });
    await c.db.execute(sql`alter system set shared_preload_libraries = 'pg_stat_statements'`);
    await c.close();
    await server.stop();
    server = await embeddedServerStart({ dataDir, database: 'scale', ephemeral: EPHEMERAL });
  }
  const d = await databaseOpen({ url: server.url, poolSize: 4 });
  if (PROFILE_DIR) await d.db.execute(sql`create extension if not exists pg_stat_statements`);
  const { token } = await tokenCreate(d.db, { role: 'admin', name: 'scale' });
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const nodes: Node[] = [];
  for (let i = 0; i < NODES; i++) nodes.push(await nodeStart(i, server.url));
  const cpuAtStart = nodes.map((n) => cpuSeconds(n.child.pid!));
  const driverCpuAtStart = process.cpuUsage();
  // PostgreSQL's CPU = serverCpuBase + the running server's so far (a restart adds the old server's to the base).
  let serverCpuBase = -serverCpuSeconds(path.join(dataDir, 'pg'));
  let serverCpuNow = -serverCpuBase;
  console.log(`${NODES} nodes up; ${AGENTS} agents, ${TASKS.toLocaleString('en-US')} tasks in DAGs of ${DAG_SIZE}, submitted at ${RATE} tasks/s, PostgreSQL ${EPHEMERAL ? 'without fsync' : 'durable'}${FAULTS ? '; a node killed at 40 %, PostgreSQL restarted at 70 %' : ''}`);

  // One HTTP call through "the load balancer": the node given, else the next one alive; 503 and lost
  // connections are retried (a report with the same fence is idempotent).
  let stopping = false;
  const call = async (start: number, p: string, body: unknown): Promise<{ status: number; body: any }> => {
    for (let attempt = 0; ; attempt++) {
      const alive = nodes.filter((n) => n.alive);
      const node = alive[(start + attempt) % alive.length]!;
      try {
        const res = await fetch(`${node.url}${p}`, { method: 'POST', headers, body: JSON.stringify(body) });
        const json = await res.json();
        if (res.status === 503) { await sleep(1000); continue; }
        return { status: res.status, body: json };
      } catch {
        if (stopping) return { status: 0, body: null };
        await sleep(200);
      }
    }
  };

  const before = nodes.map((n) => memoryAndSockets(n.child.pid!));
  for (let a = 0; a < AGENTS; a++) {
    const r = await call(a, '/api/agents', { id: `sim-${a}`, type: 'sim', capabilities: ['sim'], max_concurrent: 1 });
    if (r.status !== 201) throw new Error(`register sim-${a}: ${r.status} ${JSON.stringify(r.body)}`);
  }

  // The agents.
  const completedBy = new Map<string, string[]>();
  const completionTimes: number[] = [];
  let fenced = 0;
  const agentState: string[] = Array.from({ length: AGENTS }, () => 'idle');
  const agentLoops = Array.from({ length: AGENTS }, async (_, a) => {
    // Each agent's beats at its own phase, as agents started at different times would: not all 10,000 at once.
    let beatAt = performance.now() - Math.random() * 30_000;
    while (!stopping) {
      // A heartbeat every 30 s, as agents are asked to (the Python agent beats every 10 s).
      if (performance.now() - beatAt > 30_000) {
        agentState[a] = 'heartbeat';
        await call(a, `/api/agents/sim-${a}/heartbeat`, {});
        beatAt = performance.now();
      }
      agentState[a] = 'claiming';
      const claimed = await call(a, `/api/agents/sim-${a}/claim`, { wait_sec: 10 });
      if (claimed.status !== 200) { agentState[a] = `claim ${claimed.status}`; await sleep(500); continue; }
      for (const t of claimed.body.tasks as Array<{ id: string; fence: number }>) {
        agentState[a] = 'working';
        await sleep(200 + Math.random() * 1800);
        agentState[a] = 'reporting';
        const r = await call(a, `/api/tasks/${t.id}/complete`, { fence: t.fence, output: { by: a }, cost_usd: TASK_COST });
        if (r.status === 200) {
          completedBy.set(t.id, [...(completedBy.get(t.id) ?? []), `sim-${a}`]);
          completionTimes.push(performance.now());
        } else if (r.status === 409) fenced++;
      }
    }
  });

  // Samples: connections at PostgreSQL, each node's CPU.
  let peakConnections = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      try {
        const r = await d.db.execute(sql`select count(*)::int as n from pg_stat_activity where backend_type = 'client backend'`);
        peakConnections = Math.max(peakConnections, (r.rows[0] as { n: number }).n);
      } catch { /* restarting */ }
      for (const n of nodes) {
        const cpu = n.alive ? cpuSeconds(n.child.pid!) : NaN; // NaN: gone (killed, or stopped at the end)
        if (Number.isFinite(cpu)) n.cpuSec = cpu - cpuAtStart[n.i]!;
      }
      const serverCpu = serverCpuSeconds(path.join(dataDir, 'pg'));
      if (Number.isFinite(serverCpu)) serverCpuNow = serverCpu;
      await sleep(1000);
    }
  })();

  // The fleet idle: every agent long-polling, nothing to claim.
  if (IDLE_SEC > 0) {
    const waiting = async () => {
      let n = 0;
      for (const node of nodes) {
        const m = await fetch(`${node.url}/metrics`, { headers }).then((r) => r.text());
        n += Number(/^dagent_claims_waiting (\d+)/m.exec(m)?.[1] ?? 0);
      }
      return n;
    };
    const until = performance.now() + 60_000;
    while ((await waiting()) < AGENTS && performance.now() < until) await sleep(500);
    const idle = nodes.map((n) => memoryAndSockets(n.child.pid!));
    const [nodeCpu0, serverCpu0, script0] = [nodes.map((n) => cpuSeconds(n.child.pid!)), serverCpuSeconds(path.join(dataDir, 'pg')), process.cpuUsage()];
    await sleep(IDLE_SEC * 1000);
    const nodeCores = nodes.map((n, i) => (cpuSeconds(n.child.pid!) - nodeCpu0[i]!) / IDLE_SEC);
    const serverCores = (serverCpuSeconds(path.join(dataDir, 'pg')) - serverCpu0) / IDLE_SEC;
    const scriptCores = ((u) => (u.user + u.system) / 1e6)(process.cpuUsage(script0)) / IDLE_SEC;
    const perAgent = AGENTS / NODES;
    const rssKb = idle.reduce((a, m, i) => a + m.rssKb - before[i]!.rssKb, 0) / AGENTS;
    const sockets = idle.reduce((a, m, i) => a + m.sockets - before[i]!.sockets, 0) / AGENTS;
    console.log(`idle fleet, ${AGENTS} agents long-polling (${await waiting()} claims waiting, about ${Math.round(perAgent)} a node):`);
    console.log(`  per node: ${idle.map((m, i) => `node ${i} ${(m.rssKb / 1024).toFixed(0)} MiB, ${m.sockets} sockets (before the agents ${(before[i]!.rssKb / 1024).toFixed(0)} MiB, ${before[i]!.sockets})`).join('; ')}`);
    console.log(`  per waiting agent, at its node: ${rssKb.toFixed(1)} KiB of memory, ${sockets.toFixed(2)} sockets`);
    console.log(`  CPU while idle, ${IDLE_SEC} s: nodes ${nodeCores.map((c) => c.toFixed(3)).join(' + ')} cores, PostgreSQL ${serverCores.toFixed(3)}, this script ${scriptCores.toFixed(3)}`);
  }

  // The work, submitted at RATE through the nodes; the faults on the way.
  const started = performance.now();
  const dagCount = Math.ceil(TASKS / DAG_SIZE);
  const middle = Array.from({ length: DAG_SIZE - 2 }, (_, j) => `  t${j}: { type: w, depends_on: [root], spec: { constraints: { capabilities: [sim], max_cost_usd: ${TASK_COST * 2} } } }`);
  const yaml = (k: number) => [
    `name: scale-${k}`, `budget_usd: ${(DAG_SIZE * TASK_COST * 3).toFixed(3)}`, 'tasks:',
    `  root: { type: w, spec: { constraints: { capabilities: [sim], max_cost_usd: ${TASK_COST * 2} } } }`, ...middle,
    `  join: { type: w, depends_on: [${middle.map((_, j) => `t${j}`).join(', ')}], spec: { constraints: { capabilities: [sim], max_cost_usd: ${TASK_COST * 2} } } }`,
  ].join('\n');
  let killedAt: number | undefined;
  let restartAt: number | undefined;
  let restartedAt: number | undefined;
  let loopsMovedSec: number | undefined;
  let submitted = 0;
  const SUBMITTERS = 4;
  const submitting = new Set<Promise<void>>();
  const elapsed = () => (performance.now() - started) / 1000;
  for (let k = 0; k < dagCount && elapsed() < MAX_SEC * 0.6; k++) {
    const due = started + (k * DAG_SIZE * 1000) / RATE;
    if (due > performance.now()) await sleep(due - performance.now());
    // Up to SUBMITTERS submissions at once, as several clients would: one slow answer does not hold the rate back.
    while (submitting.size >= SUBMITTERS) await Promise.race(submitting);
    const one = call(k, '/api/dags', { yaml: yaml(k) }).then((r) => {
      if (r.status !== 201) throw new Error(`submit scale-${k}: ${r.status} ${JSON.stringify(r.body)}`);
      submitted++;
    }).finally(() => submitting.delete(one));
    submitting.add(one);
    if (FAULTS && NODES > 1 && killedAt === undefined && (k >= dagCount * 0.4 || elapsed() >= MAX_SEC * 0.25)) {
      const victim = nodes[0]!;
      victim.alive = false;
      victim.child.kill('SIGKILL');
      killedAt = performance.now();
      console.log(`killed node 0 (pid ${victim.child.pid}) after ${((killedAt - started) / 1000).toFixed(1)} s`);
      void (async () => {
        for (;;) {
          await sleep(250);
          const r2 = await d.db.execute(sql`select count(*)::int as n from maintenance_leases where holder like ${`%/${victim.child.pid}/%`}`).catch(() => null);
          if (r2 && (r2.rows[0] as { n: number }).n === 0) { loopsMovedSec = (performance.now() - killedAt!) / 1000; return; }
        }
      })();
    }
    if (FAULTS && restartAt === undefined && (k >= dagCount * 0.7 || elapsed() >= MAX_SEC * 0.45)) {
      restartAt = performance.now();
      console.log(`restarting PostgreSQL after ${((restartAt - started) / 1000).toFixed(1)} s`);
      serverCpuBase += serverCpuSeconds(path.join(dataDir, 'pg'));
      serverCpuNow = 0;
      await server.stop();
      server = await embeddedServerStart({ dataDir, database: 'scale', ephemeral: EPHEMERAL });
      restartedAt = performance.now();
    }
  }
  await Promise.all(submitting);
  const submittedSec = (performance.now() - started) / 1000;

  // Until every DAG submitted completed, or the time is up.
  const deadline = started + MAX_SEC * 1000;
  let open = Infinity;
  while (open > 0 && performance.now() < deadline) {
    await sleep(1000);
    const r = await d.db.execute(sql`select count(*)::int as n from dags where status <> 'completed'`).catch(() => null);
    if (r) open = (r.rows[0] as { n: number }).n;
  }
  const wallSec = (performance.now() - started) / 1000;
  if (open > 0) {
    const states = new Map<string, number>();
    for (const st of agentState) states.set(st, (states.get(st) ?? 0) + 1);
    console.log(`agents by state at the end: ${JSON.stringify(Object.fromEntries(states))}`);
    for (const n of nodes.filter((x) => x.alive)) {
      const m = await fetch(`${n.url}/metrics`, { headers, signal: AbortSignal.timeout(5000) }).then((r) => r.text()).catch((e: Error) => `unreachable: ${e.message}`);
      console.log(`node ${n.i}: ${m.split('\n').filter((l) => /^dagent_claims_waiting|^dagent_listener_reconnects_total|^unreachable/.test(l)).join(', ')}`);
    }
  }
  stopping = true;
  sampling = false;
  await sampler;
  for (const n of nodes) if (n.alive) n.child.kill('SIGTERM');
  await Promise.race([Promise.all(agentLoops), sleep(15_000)]);

  // Figures and checks, from the database.
  const one = async <T>(q: ReturnType<typeof sql>) => (await d.db.execute(q)).rows[0] as T;
  const dispatch = (await d.db.execute(sql`
    select extract(epoch from (a.started_at - t.ready_at)) * 1000 as ms from attempts a join tasks t on t.id = a.task_id
    where a.outcome = 'completed' and t.ready_at is not null and a.started_at >= t.ready_at`)).rows.map((r) => Number((r as { ms: number }).ms));
  const { tasks_open: tasksOpen } = await one<{ tasks_open: number }>(sql`select count(*)::int as tasks_open from tasks where status <> 'completed'`);
  const { twice } = await one<{ twice: number }>(sql`select count(*)::int as twice from (select task_id from attempts where outcome = 'completed' group by task_id having count(*) > 1) x`);
  const { over } = await one<{ over: number }>(sql`select count(*)::int as over from dags where budget_usd is not null and spent_usd > budget_usd`);
  const { total } = await one<{ total: number }>(sql`select count(*)::int as total from tasks`);
  const reRun = [...completedBy.values()].filter((by) => by.length > 1).length;
  // The longest pause between two completions from a second before the restart to 30 s after it.
  let stalledSec: number | undefined;
  if (restartAt !== undefined) {
    const around = completionTimes.filter((t) => t >= restartAt! - 1000 && t <= restartedAt! + 30_000).sort((a, b) => a - b);
    stalledSec = 0;
    for (let i = 1; i < around.length; i++) stalledSec = Math.max(stalledSec, (around[i]! - around[i - 1]!) / 1000);
  }
  const serverCpuTotal = serverCpuBase + serverCpuNow;
  const rows: Array<[string, string]> = [
    ['tasks', `${total.toLocaleString('en-US')} in ${submitted} DAGs, submitted over ${submittedSec.toFixed(0)} s${submitted < dagCount ? ` (${dagCount} planned: the time bound stopped the rest)` : ''}`],
    ['throughput', `${Math.round((total - tasksOpen) / wallSec)} tasks/s over ${wallSec.toFixed(0)} s`],
    ['dispatch (READY → claimed) p50 / p99', `${percentile(dispatch, 50).toFixed(0)} / ${percentile(dispatch, 99).toFixed(0)} ms`],
    ['connections at PostgreSQL, peak', `${peakConnections} (${NODES} nodes of pool 10 + 1 LISTEN each, and this script's 4 + 1)`],
    ['CPU of this script (agents, submissions)', `${(((u) => (u.user + u.system) / 1e6)(process.cpuUsage(driverCpuAtStart)) / wallSec).toFixed(2)} cores`],
    ['CPU of PostgreSQL', `${(serverCpuTotal / wallSec).toFixed(2)} cores; ${Math.round((total - tasksOpen) / serverCpuTotal)} tasks per PostgreSQL CPU-second`],
    ['CPU per node', nodes.map((n) => `node ${n.i}${n.alive ? '' : ' (killed)'}: ${(n.cpuSec / wallSec).toFixed(2)} cores`).join(', ')],
    ...(killedAt !== undefined ? [['loops off the killed node', loopsMovedSec === undefined ? 'not within the run' : `${loopsMovedSec.toFixed(1)} s after the kill`] as [string, string]] : []),
    ...(restartAt !== undefined ? [['PostgreSQL restart', `down ${((restartedAt! - restartAt) / 1000).toFixed(1)} s; longest pause between completions around it ${stalledSec?.toFixed(1) ?? '?'} s`] as [string, string]] : []),
    ['reports refused by fencing (lease lost)', String(fenced)],
    ['tasks run by two agents (one completion counted)', String(reRun)],
  ];
  for (const [k, v] of rows) console.log(`${k.padEnd(52)} ${v}`);
  const checks: Array<[string, boolean]> = [
    ['nothing lost: every task completed', tasksOpen === 0],
    ['nothing twice: one completed attempt per task', twice === 0],
    ['no budget over-committed', over === 0],
  ];
  // Completions per 10 s (by the agents' clocks), and what is left: where a stall began.
  const buckets = new Map<number, number>();
  for (const t of completionTimes) buckets.set(Math.floor((t - started) / 10_000), (buckets.get(Math.floor((t - started) / 10_000)) ?? 0) + 1);
  console.log(`completions per 10 s: ${[...Array(Math.ceil(wallSec / 10)).keys()].map((b) => buckets.get(b) ?? 0).join(' ')}`);
  if (tasksOpen > 0) {
    console.log(`open tasks by status: ${JSON.stringify((await d.db.execute(sql`select status, count(*)::int as n from tasks where status <> 'completed' group by status`)).rows)}`);
    console.log(`open DAGs: ${JSON.stringify((await d.db.execute(sql`select status, blocked_reason, count(*)::int as n, sum(reserved_usd)::float as reserved from dags where status <> 'completed' group by 1, 2`)).rows)}`);
    console.log(`agents: ${JSON.stringify((await d.db.execute(sql`select status, count(*)::int as n, sum(reserved_usd)::float as reserved from agents group by 1`)).rows)}`);
    const { unclaimableList } = await import('../../src/engine/ops/priority.js');
    const why = new Map<string, number>();
    for (const u of await unclaimableList(d.db, 1000)) why.set(u.detail, (why.get(u.detail) ?? 0) + 1);
    console.log(`unclaimable READY tasks: ${JSON.stringify(Object.fromEntries(why))}`);
  }
  if (PROFILE_DIR) {
    const done = total - tasksOpen;
    const top = (await d.db.execute(sql`select calls::bigint as calls, total_exec_time as ms, left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 90) as query
      from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database()) order by total_exec_time desc limit 15`)).rows as Array<{ calls: number; ms: number; query: string }>;
    const all = (await d.db.execute(sql`select sum(calls)::bigint as calls, sum(total_exec_time) as ms from pg_stat_statements
      where dbid = (select oid from pg_database where datname = current_database())`)).rows[0] as { calls: number; ms: number };
    // The claim statement is the one with the agent's reservation (tasks-claim/update.ts agentClaimedCte), in either shape.
    const claims = (await d.db.execute(sql`select coalesce(sum(calls), 0)::bigint as calls from pg_stat_statements
      where dbid = (select oid from pg_database where datname = current_database()) and query like '%agent_claimed as (%'`)).rows[0] as { calls: number };
    console.log(`statements at PostgreSQL: ${(Number(all.calls) / done).toFixed(1)} per task, ${(all.ms / done).toFixed(2)} ms server time per task; claims: ${(Number(claims.calls) / done).toFixed(2)} per task`);
    for (const t of top) console.log(`  ${(Number(t.calls) / done).toFixed(2).padStart(6)}/task ${(t.ms / Number(t.calls)).toFixed(3).padStart(7)} ms ${((100 * t.ms) / all.ms).toFixed(1).padStart(5)} %  ${t.query}`);
    console.log(`node CPU profiles in ${PROFILE_DIR}`);
  }
  console.log('');
  for (const [k, ok] of checks) console.log(`${ok ? 'ok  ' : 'FAIL'} ${k}${k.startsWith('nothing lost') && !ok ? ` (${tasksOpen} open)` : ''}`);
  await d.close();
  await server.stop();
  rmSync(dataDir, { recursive: true, force: true });
  process.exit(checks.every(([, ok]) => ok) ? 0 : 1);
}

await main();
