/**
 * What a claim would cost on a narrow queue table (#19 item 2's candidate, as Hatchet's v1 engine keeps its queue
 * items), beside dagent's claim of the wide task rows, in the same database and minute. Measured, not built
 * (docs/benchmarks.md "Where the floor is").
 *
 * The queue table holds the claim's columns only, with the same partial indexes as tasks (the claim groups' walk,
 * held, leases). A narrow claim of 200 is its UPDATE, then reading the 200 task rows an agent needs, and at
 * completion a DELETE of the queue rows; dagent's claim and completion run as they do (taskClaimReadySql,
 * taskCompleteMarkSql, prepared with generic plans). Each under EXPLAIN (ANALYZE, WAL), committed, p50 of 35 rounds
 * after 5 not counted.
 * The narrow claim has no agent row, budget or held count: its figure is a lower bound, the saving an upper one.
 */
import { sql } from 'drizzle-orm';
import type { Database } from '../../src/db/handle.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { taskClaimReadySql } from '../../src/db/queries/tasks-claim.js';
import { taskCompleteMarkSql } from '../../src/db/queries/tasks-complete.js';
import { inlineParams } from '../../src/db/statement.js';
import { explainPrepared, explainText } from './explain.js';
import { analyze, pct, reset, submitFlat } from './workload.js';

const ROUNDS = 40;
const WARM = 5;

export async function narrowQueueCompare(d: Database): Promise<string[]> {
  await reset(d);
  await submitFlat(d, 40_000);
  await analyze(d);
  await d.db.execute(sql.raw(`
    drop table if exists bench_queue;
    create table bench_queue as select id, cap_key, effective_priority, ready_at, 'ready'::text as status, null::text as claimed_by,
      fence, null::timestamptz as lease_expires_at from tasks where status = 'ready';
    alter table bench_queue add primary key (id);
    create index bench_queue_ready on bench_queue (cap_key, effective_priority, ready_at, id) where status = 'ready';
    create index bench_queue_held on bench_queue (claimed_by) where status in ('claimed', 'running');
    create index bench_queue_lease on bench_queue (lease_expires_at) where status in ('claimed', 'running');`));
  await d.db.execute(sql`vacuum analyze bench_queue`);
  await agentRegister(d.db, { id: 'wide', type: 'bench', capabilities: [], maxConcurrent: 1000 });
  const client = await d.pool.connect();
  const figures = async (run: Promise<{ 'Execution Time': number; Plan: { 'WAL Bytes'?: number } }>) => {
    const plan = await run;
    return { ms: plan['Execution Time'], wal: plan.Plan['WAL Bytes'] ?? 0 };
  };
  const runs: Record<'wideClaim' | 'wideComplete' | 'narrowClaim' | 'narrowRead' | 'narrowDelete', Array<{ ms: number; wal: number }>> =
    { wideClaim: [], wideComplete: [], narrowClaim: [], narrowRead: [], narrowDelete: [] };
  try {
    for (let i = 0; i < ROUNDS; i++) {
      const wideClaim = await figures(explainPrepared(client, 'narrow_wide_claim', taskClaimReadySql('wide', [], 200, 60)));
      const held = (await client.query<{ id: string; fence: number }>(`select id, fence from tasks where claimed_by = 'wide' and status = 'claimed'`)).rows;
      const wideComplete = await figures(explainPrepared(client, 'narrow_wide_complete', taskCompleteMarkSql(held.map((t) => ({ id: t.id, fence: t.fence, output: null })))));
      const narrowClaim = await figures(explainText(client, `with c as (select id from bench_queue where status = 'ready' and cap_key = ''
          order by effective_priority, ready_at, id limit 200 for update skip locked)
        update bench_queue q set status = 'claimed', claimed_by = 'narrow', fence = q.fence + 1,
          lease_expires_at = clock_timestamp() + interval '60 s' from c where q.id = c.id returning q.id`));
      const ids = (await client.query<{ id: string }>(`select id from bench_queue where claimed_by = 'narrow' and status = 'claimed'`)).rows.map((r) => r.id);
      const narrowRead = await figures(explainText(client, inlineParams(`select t.id, t.dag_id, t.key, t.type, t.title, t.spec, t.max_attempts, t.max_duration_sec,
        t.heartbeat_sec, t.output_spec, t.origin from tasks t where t.id = any($1)`, [ids])));
      const narrowDelete = await figures(explainText(client, inlineParams(`delete from bench_queue where id = any($1)`, [ids])));
      if (i >= WARM) Object.entries({ wideClaim, wideComplete, narrowClaim, narrowRead, narrowDelete }).forEach(([k, v]) => runs[k as keyof typeof runs].push(v));
    }
  } finally {
    await client.query('deallocate all').catch(() => {});
    client.release();
    await d.db.execute(sql`drop table if exists bench_queue`);
  }
  const p50 = (k: keyof typeof runs, f: 'ms' | 'wal') => pct(runs[k].map((r) => r[f]), 50);
  const perTask = (bytes: number) => `${Math.round(bytes / 200)} bytes`;
  const narrow = p50('narrowClaim', 'ms') + p50('narrowRead', 'ms') + p50('narrowDelete', 'ms');
  return [
    `narrow queue table, 40,000 READY, 200 at a time (EXPLAIN ANALYZE, p50 of ${ROUNDS - WARM}): dagent's claim of the wide rows ${p50('wideClaim', 'ms').toFixed(2)} ms (WAL ${perTask(p50('wideClaim', 'wal'))} per task), ` +
      `its completion ${p50('wideComplete', 'ms').toFixed(2)} ms; narrow claim ${p50('narrowClaim', 'ms').toFixed(2)} ms (WAL ${perTask(p50('narrowClaim', 'wal'))}) + reading the task rows ${p50('narrowRead', 'ms').toFixed(2)} ms ` +
      `+ deleting the queue rows at completion ${p50('narrowDelete', 'ms').toFixed(2)} ms (WAL ${perTask(p50('narrowDelete', 'wal'))}) = ${narrow.toFixed(2)} ms: ` +
      `${(((p50('wideClaim', 'ms') - narrow) * 1000) / 200).toFixed(1)} µs less per task, of ${(((p50('wideClaim', 'ms') + p50('wideComplete', 'ms')) * 1000) / 200).toFixed(1)} µs in claim and completion`,
  ];
}
