/**
 * npm run bench -- --breakdown [--quick]: where a task's time goes on the hot path (#19 item 1).
 *
 * A server of its own, with pg_stat_statements loaded (it costs a few per cent, so the figures' server runs
 * without it). Three parts:
 * - **Per statement.** The flat run and the chains run of the figures, after warm-up runs, with pg_stat_statements
 *   reset before each: each statement kind's calls, execution and planning time, WAL and buffers, per task; beside them the wall time
 *   per task, the Node process's CPU per task (process.cpuUsage) and the server's (every PostgreSQL process of
 *   the cluster, from /proc, so the WAL writer and the checkpointer count too, and exited backends through the
 *   postmaster's reaped-children counters).
 * - **Inside the two statements.** `EXPLAIN (ANALYZE, BUFFERS, WAL)` of a claim of 200 and of completing 200 chain
 *   heads (each unblocks its next task), run as they run (a prepared statement, generic plan), 15 rounds on fresh
 *   rows; each plan node's own time (its total less its children's) is charged to the CTE it belongs to, and the
 *   medians are printed with the triggers' times.
 * - **Where the loop waits** during the flat and chains runs: the backends' states and the machine's (activity.ts).
 * - **A lone completion that hands its dependent on**: the idle hop's statement. One chain, one task at a time, in
 *   turn: EXPLAINed as above; timed from Node as the runtime runs it (send to reply, committed); and the same inside
 *   BEGIN … COMMIT, the statement and the commit timed apart, beside a one-row UPDATE and `select 1` (the least a
 *   durable write and a round trip cost).
 * - **A narrow queue table**, measured beside the wide rows (narrow-queue.ts).
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../src/db/open.js';
import type { Database } from '../../src/db/handle.js';
import { embeddedServerStart } from '../../src/db/embedded.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskClaimReadySql } from '../../src/db/queries/tasks-claim.js';
import { taskCompleteMark, taskCompleteMarkCompiled, taskCompleteMarkSql } from '../../src/db/queries/tasks-complete.js';
import { activityDuring } from './activity.js';
import { explainPrepared, type Explained, type PlanNode } from './explain.js';
import { serverCpuSeconds } from '../helpers/proc.js';
import { graphileFlatReady } from './peers.js';
import { narrowQueueCompare } from './narrow-queue.js';
import { analyze, fmt, pct, reset, runAgent, submitChains, submitFlat, BATCH } from './workload.js';

const REPEATS = 15;
/** Lone completions of each kind (EXPLAINed, timed from Node, timed in parts): a chain of three times as many, plus the warm-up's. */
const LONE_ROUNDS = 60;

interface StatementRow { query: string; calls: string; exec: number; plan: number; rows: string; wal: string; blocks: string }

/** The statement kinds of the hot path, by a phrase only their text holds. */
function kindOf(query: string): string {
  if (query.includes('agent_claimed as')) return 'claim';
  // pg_stat_activity shows a statement's first 1,024 bytes: the completion's first CTE, not `recorded`.
  if (query.includes('recorded as (') || /^\s*with input as \(/.test(query)) return 'completion';
  if (query.includes('plan_cache_mode')) return 'set plan_cache_mode (claim)';
  if (/^\s*(begin|commit|rollback)/i.test(query)) return 'begin/commit';
  return query.replace(/\s+/g, ' ').trim().slice(0, 60);
}

/** Per statement kind and per task, over `run` (which returns the tasks done and the seconds it took), in `database`. */
async function perStatement(d: Database, clusterDir: string, label: string, database: string, run: () => Promise<{ tasks: number; seconds: number }>): Promise<string[]> {
  await d.db.execute(sql`select pg_stat_statements_reset()`);
  const lsn0 = await walInsertLsn(d);
  const [node0, server0] = [process.cpuUsage(), serverCpuSeconds(clusterDir)];
  const { tasks, seconds } = await run();
  const node = process.cpuUsage(node0);
  const server = (serverCpuSeconds(clusterDir) - server0) * 1000;
  const wal = await walByRecord(d, lsn0, await walInsertLsn(d), tasks);
  const { rows } = await d.db.execute(sql`
    select query, calls::text, total_exec_time as exec, total_plan_time as plan, rows::text, wal_bytes::text as wal,
      (shared_blks_hit + shared_blks_read)::text as blocks
    from pg_stat_statements where dbid = (select oid from pg_database where datname = ${database})
      and query not like '%pg_stat_activity%'`); // not the waits' sampler (activity.ts)
  const kinds = new Map<string, { calls: number; exec: number; plan: number; rows: number; wal: number; blocks: number }>();
  for (const r of rows as unknown as StatementRow[]) {
    const k = kindOf(r.query);
    const v = kinds.get(k) ?? { calls: 0, exec: 0, plan: 0, rows: 0, wal: 0, blocks: 0 };
    v.calls += Number(r.calls); v.exec += r.exec; v.plan += r.plan; v.rows += Number(r.rows); v.wal += Number(r.wal); v.blocks += Number(r.blocks);
    kinds.set(k, v);
  }
  const us = (ms: number) => ((ms * 1000) / tasks).toFixed(1);
  const all = [...kinds.values()].reduce((a, v) => ({ exec: a.exec + v.exec, plan: a.plan + v.plan }), { exec: 0, plan: 0 });
  const out = [
    `${label}: ${fmt(tasks / seconds)} tasks/s; per task: wall ${us(seconds * 1000)} µs, Node CPU ${us((node.user + node.system) / 1000)} µs, ` +
      `PostgreSQL CPU (all its processes) ${us(server)} µs, of which statements executing ${us(all.exec)} µs and planning ${us(all.plan)} µs`,
  ];
  out.push(...wal);
  const sorted = [...kinds.entries()].sort((a, b) => b[1].exec - a[1].exec).filter(([, v]) => v.exec / tasks > 0.0005);
  for (const [k, v] of sorted.slice(0, 6)) {
    out.push(`  ${k}: ${fmt(v.calls)} calls; per task: execution ${us(v.exec)} µs, planning ${us(v.plan)} µs, WAL ${(v.wal / tasks).toFixed(0)} bytes, buffers ${(v.blocks / tasks).toFixed(1)}; per call ${(v.exec / v.calls).toFixed(2)} ms`);
  }
  return out;
}

async function walInsertLsn(d: Database): Promise<string> {
  const { rows } = await d.db.execute(sql`select pg_current_wal_insert_lsn()::text as lsn`);
  return (rows[0] as { lsn: string }).lsn;
}

interface WalStatRow { record: string; relation: string; count: string; bytes: string; fpi: string }

/**
 * The WAL the cluster wrote between two points, per task, by record type and relation (pg_walinspect): every
 * process's, so commit records, the checkpointer's and full-page images count, which pg_stat_statements'
 * per-statement bytes do not all show. The relation is the record's first block's (a heap or an index).
 */
async function walByRecord(d: Database, from: string, to: string, tasks: number): Promise<string[]> {
  const { rows } = await d.db.execute(sql`
    with r as (
      select resource_manager || '/' || record_type as record, record_length, fpi_length,
        (regexp_match(block_ref, 'rel [0-9]+/[0-9]+/([0-9]+)'))[1]::oid as node
      from pg_get_wal_records_info(${from}::pg_lsn, ${to}::pg_lsn))
    select record, coalesce(c.relname, '-') as relation, count(*)::text as count, sum(record_length)::text as bytes,
      sum(fpi_length)::text as fpi
    from r left join pg_class c on c.relfilenode = r.node group by 1, 2`);
  const all = (rows as unknown as WalStatRow[]).map((r) => ({ ...r, count: Number(r.count), bytes: Number(r.bytes), fpi: Number(r.fpi) }));
  const total = all.reduce((a, r) => a + r.bytes, 0);
  const fpi = all.reduce((a, r) => a + r.fpi, 0);
  const top = all.sort((a, b) => b.bytes - a.bytes).slice(0, 12);
  return [
    `  WAL (the cluster's, pg_walinspect): ${(total / tasks).toFixed(0)} bytes per task, of which full-page images ${(fpi / tasks).toFixed(0)}; the largest, per task (record on relation: bytes ×records):`,
    `    ${top.map((r) => `${r.record} on ${r.relation} ${(r.bytes / tasks).toFixed(0)} ×${(r.count / tasks).toFixed(2)}`).join(' · ')}`,
  ];
}

/** The bench loop (workload.ts) over what `load` queued, after the statistics are fresh. */
async function dagentRun(d: Database, tasks: number, load: () => Promise<void>, handOff: boolean): Promise<() => Promise<{ tasks: number; seconds: number }>> {
  await reset(d);
  await load();
  await analyze(d);
  return async () => ({ tasks, seconds: (await runAgent(d, 32, tasks, BATCH, handOff)).seconds });
}

/** Each node's own time (less its children's), charged to the CTE it belongs to; a CTE Scan's is the CTE's own. */
function timeByCte(plan: PlanNode, into: Map<string, number>, cte = 'main select'): void {
  const name = plan['Subplan Name']?.startsWith('CTE ') ? plan['Subplan Name'].slice(4) : cte;
  const total = plan['Actual Total Time'] * plan['Actual Loops'];
  const children = (plan.Plans ?? []).reduce((a, c) => a + c['Actual Total Time'] * c['Actual Loops'], 0);
  const own = plan['Node Type'] === 'CTE Scan' ? 0 : Math.max(0, total - children);
  into.set(name, (into.get(name) ?? 0) + own);
  for (const c of plan.Plans ?? []) timeByCte(c, into, name);
}

/** The own time of each CTE (p50 over the runs), the execution and planning times, and the triggers'. */
function explainSummary(runs: Explained[]): string[] {
  const median = (xs: number[]) => pct(xs, 50);
  const byCte = runs.map((r) => { const m = new Map<string, number>(); timeByCte(r.Plan, m); return m; });
  const names = [...new Set(byCte.flatMap((m) => [...m.keys()]))];
  const rows = names.map((n) => [n, median(byCte.map((m) => m.get(n) ?? 0))] as const).sort((a, b) => b[1] - a[1]);
  const triggers = new Map<string, number[]>();
  for (const r of runs) for (const t of r.Triggers ?? []) triggers.set(t['Trigger Name'], [...(triggers.get(t['Trigger Name']) ?? []), t.Time]);
  return [
    `  execution p50 ${median(runs.map((r) => r['Execution Time'])).toFixed(2)} ms, planning p50 ${median(runs.map((r) => r['Planning Time'])).toFixed(2)} ms; own time by CTE (p50 of ${runs.length}):`,
    `    ${rows.filter(([, ms]) => ms >= 0.005).map(([n, ms]) => `${n} ${ms.toFixed(2)}`).join(' · ')} ms`,
    ...(triggers.size ? [`    triggers: ${[...triggers].map(([n, ts]) => `${n} ${median(ts).toFixed(2)} ms`).join(' · ')}`] : []),
  ];
}

/**
 * `EXPLAIN (ANALYZE, BUFFERS, WAL)` of the claim and the completion as they run: prepared, generic plans, on one
 * connection, committed. 200 chains: each round claims their 200 heads and completes them, which makes the next 200
 * READY, so every round works on fresh rows (rolled back and repeated, the same rows' dead versions pile up in the
 * indexes and an UPDATE grows ~2× slower).
 */
async function explainRounds(d: Database, agentId: string, rounds: number): Promise<{ claim: Explained[]; completion: Explained[] }> {
  const client = await d.pool.connect();
  const out = { claim: [] as Explained[], completion: [] as Explained[] };
  try {
    for (let i = 0; i < rounds; i++) {
      const claim = await explainPrepared(client, 'breakdown_claim', taskClaimReadySql(agentId, [], 200, 60));
      const { rows } = await client.query<{ id: string; fence: number }>(`select id, fence from tasks where claimed_by = $1 and status = 'claimed'`, [agentId]);
      const completion = await explainPrepared(client, 'breakdown_complete', taskCompleteMarkSql(rows.map((t) => ({ id: t.id, fence: t.fence, output: null }))));
      // The first two rounds plan the statements and warm the caches.
      if (i >= 2) { out.claim.push(claim); out.completion.push(completion); }
    }
  } finally {
    await client.query('deallocate all').catch(() => {});
    client.release();
  }
  return out;
}

/**
 * The idle hop's statement: a chain's task completed alone, handing its dependent to the completing agent, as the
 * runtime's lone completion does. Each round works on the task the round before handed on, in turn: EXPLAINed
 * (generic plan, as above); run as the runtime runs it (taskCompleteMark through the pool, send to reply with its
 * commit); and run inside BEGIN … COMMIT on one connection, the statement and the commit timed apart, each followed
 * by a one-row UPDATE the same way and a `select 1`.
 */
async function loneHandOffRounds(d: Database, agentId: string, rounds: number) {
  const out = { explained: [] as Explained[], replyMs: [] as number[], statementMs: [] as number[], commitMs: [] as number[], rowStatementMs: [] as number[], rowCommitMs: [] as number[], selectMs: [] as number[] };
  const handTo = { agentId, capabilities: [], max: 1, start: false, claimTtlSec: 60 };
  const client = await d.pool.connect();
  const timed = async (f: () => Promise<unknown>) => { const t0 = performance.now(); await f(); return performance.now() - t0; };
  try {
    await client.query('create table if not exists bench_one_row (id int primary key, n int not null); insert into bench_one_row values (1, 0) on conflict do nothing');
    // The chain's head, claimed as an agent claims it; each completion below hands on the next task.
    await taskClaim(d.db, agentId, { limit: 1, capabilities: [] });
    for (let i = 0; i < rounds * 3; i++) {
      const { rows } = await client.query<{ id: string; fence: number }>(`select id, fence from tasks where claimed_by = $1 and status = 'claimed'`, [agentId]);
      if (rows.length !== 1) throw new Error(`lone completion: ${rows.length} tasks held, expected 1 (nothing handed on?)`);
      const items = [{ id: rows[0]!.id, fence: rows[0]!.fence, output: null }];
      const warm = i >= 6;
      if (i % 3 === 0) {
        const e = await explainPrepared(client, 'breakdown_lone', taskCompleteMarkSql(items, { handTo }));
        if (warm) out.explained.push(e);
      } else if (i % 3 === 1) {
        const ms = await timed(() => taskCompleteMark(d.db, items, { handTo }));
        if (warm) out.replyMs.push(ms);
      } else {
        // As the runtime sends it (a named prepared statement, db/statement.ts rowsOfPrepared), in a transaction.
        const q = taskCompleteMarkCompiled(items, { handTo });
        await client.query('begin');
        const statement = await timed(() => client.query({ name: `breakdown_${q.hash}`, text: q.sql, values: q.params }));
        const commit = await timed(() => client.query('commit'));
        await client.query('begin');
        const rowStatement = await timed(() => client.query({ name: 'breakdown_row', text: 'update bench_one_row set n = n + 1 where id = 1' }));
        const rowCommit = await timed(() => client.query('commit'));
        const select = await timed(() => client.query({ name: 'breakdown_select', text: 'select 1' }));
        if (warm) { out.statementMs.push(statement); out.commitMs.push(commit); out.rowStatementMs.push(rowStatement); out.rowCommitMs.push(rowCommit); out.selectMs.push(select); }
      }
    }
  } finally {
    await client.query('deallocate all').catch(() => {});
    client.release();
  }
  return out;
}

export async function breakdownBench(quick: boolean, handOff: boolean): Promise<string[]> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-breakdown-'));
  chmodSync(dataDir, 0o755);
  const clusterDir = path.join(dataDir, 'pg');
  let server = await embeddedServerStart({ dataDir, database: 'bench' });
  let d = await databaseOpen({ url: server.url, poolSize: 20 });
  const lines: string[] = [];
  try {
    await d.db.execute(sql`alter system set shared_preload_libraries = 'pg_stat_statements'`);
    await d.db.execute(sql`alter system set pg_stat_statements.track_planning = on`);
    await d.close();
    await server.stop();
    server = await embeddedServerStart({ dataDir, database: 'bench' });
    d = await databaseOpen({ url: server.url, poolSize: 20 });
    await d.db.execute(sql`create extension if not exists pg_stat_statements`);
    await d.db.execute(sql`create extension if not exists pg_walinspect`);
    const flat = quick ? 4_000 : 20_000;
    const chains = quick ? 40 : 200;
    // Not measured: the first runs compile the hot paths (JIT) and prepare the statements on each pooled connection,
    // where PostgreSQL plans a prepared statement afresh for its first five runs before it settles on a generic plan.
    await (await dagentRun(d, 4_000, () => submitFlat(d, 4_000), handOff))();
    await (await dagentRun(d, 2_000, () => submitChains(d, 40, 50), handOff))();
    // The claim runs as `SET LOCAL …; EXECUTE …` (rowsOfPreparedGeneric), which is what pg_stat_activity shows of it.
    const waits: string[] = [];
    const watched = (run: () => Promise<{ tasks: number; seconds: number }>) => async () => {
      const { result, lines: seen } = await activityDuring(server.url, (q) => kindOf(q).replace('set plan_cache_mode (claim)', 'claim'), run);
      waits.push(...seen);
      return result;
    };
    lines.push(...await perStatement(d, clusterDir, `dagent, flat ${fmt(flat)}, 32 slots, batch ${BATCH}${handOff ? '' : ', no hand-off'}`, 'bench', watched(await dagentRun(d, flat, () => submitFlat(d, flat), handOff))), ...waits.splice(0));
    lines.push(...await perStatement(d, clusterDir, `dagent, chains ${chains} × 50, 32 slots, batch ${BATCH}${handOff ? '' : ', no hand-off'}`, 'bench', watched(await dagentRun(d, chains * 50, () => submitChains(d, chains, 50), handOff))), ...waits.splice(0));
    // The same flat work on graphile-worker batched (the target's peer), for its cost per job beside dagent's.
    const peer = await graphileFlatReady(server.url, flat);
    lines.push(...await perStatement(d, clusterDir, `graphile-worker batched, flat ${fmt(flat)}, 32 slots`, peer.database, async () => ({ tasks: flat, seconds: flat / (await peer.run()) })));
    // Inside the statements: 200 chains, so a claim of 200 takes their heads and completing them unblocks 200.
    await reset(d);
    await submitChains(d, 200, REPEATS + 3);
    await analyze(d);
    await agentRegister(d.db, { id: 'explain', type: 'bench', capabilities: [], maxConcurrent: 1000 });
    const rounds = await explainRounds(d, 'explain', REPEATS + 2);
    lines.push('claim of 200 (the heads of 200 chains):', ...explainSummary(rounds.claim));
    lines.push('completion of those 200 (each unblocks its next task):', ...explainSummary(rounds.completion));
    await reset(d);
    await submitChains(d, 1, LONE_ROUNDS * 3 + 8);
    await analyze(d);
    await agentRegister(d.db, { id: 'lone', type: 'bench', capabilities: [], maxConcurrent: 1000 });
    const lone = await loneHandOffRounds(d, 'lone', LONE_ROUNDS);
    lines.push('a lone completion handing its dependent on (the idle hop\'s statement):', ...explainSummary(lone.explained),
      `  as the runtime runs it (send → reply, its commit inside, generic or custom plan as PostgreSQL chose): p50 ${pct(lone.replyMs, 50).toFixed(2)} ms, p90 ${pct(lone.replyMs, 90).toFixed(2)} ms (${lone.replyMs.length})`,
      `  in BEGIN … COMMIT, p50: the statement ${pct(lone.statementMs, 50).toFixed(2)} ms, its commit ${pct(lone.commitMs, 50).toFixed(2)} ms; a one-row UPDATE ${pct(lone.rowStatementMs, 50).toFixed(2)} ms, its commit ${pct(lone.rowCommitMs, 50).toFixed(2)} ms; select 1 ${pct(lone.selectMs, 50).toFixed(2)} ms (${lone.selectMs.length} each)`);
    lines.push(...await narrowQueueCompare(d));
  } finally {
    await d.close();
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
  return lines;
}
