import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import type { Database } from '../../src/db/handle.js';
import { textArray } from '../../src/db/statement.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskCompleteMany } from '../../src/engine/attempt/complete.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { tenantCreate } from '../../src/engine/ops/tenants.js';
import { tenantShareCreate } from '../../src/maintenance/tenant-share.js';
import { analyze, reset, task } from './workload.js';

/** Jain's fairness index of what each got against what it should (1: exactly in proportion; 1/n: all to one). */
export function jainIndex(got: number[], weights: number[]): number {
  const x = got.map((g, i) => g / weights[i]!);
  const sum = x.reduce((a, b) => a + b, 0);
  const squares = x.reduce((a, b) => a + b * b, 0);
  return squares === 0 ? 1 : (sum * sum) / (x.length * squares);
}

async function tenantsFresh(d: Database, ids: string[], weight: (i: number) => number = () => 1): Promise<void> {
  await reset(d);
  await d.db.execute(sql`delete from tenant_served`);
  await d.db.execute(sql`delete from tenants where id <> 'default'`);
  await d.db.execute(sql`update tenants set vtime = 0, served_tokens = 0, served_tasks = 0`);
  for (const [i, id] of ids.entries()) await tenantCreate(d.db, { id, weight: weight(i) });
}

/**
 * Claim of 1 with `total` READY tasks spread over `tenants` tenants (each its own DAG, tasks of 100 to 2,000 estimated
 * tokens), in fair-share order: what a claim costs when it orders 1,000 tenants by virtual time. With `idle`, that many
 * tenants more had work once and have none now (their groups exist; the share loop lifted them to the lowest vtime).
 */
export async function tenantClaimLatency(d: Database, total: number, tenants: number, claims: number, idle = 0): Promise<number[]> {
  const ids = Array.from({ length: tenants }, (_, i) => `t${i}`);
  const idleIds = Array.from({ length: idle }, (_, i) => `i${i}`);
  await tenantsFresh(d, [...idleIds, ...ids]);
  if (idle) {
    for (const id of idleIds) await dagSubmit(d.db, [{ name: `once-${id}`, params: {}, tasks: [task('k0')] }], { tenant: id });
    await agentRegister(d.db, { id: 'idle-maker', type: 'bench', capabilities: [], maxConcurrent: 1000 });
    for (let got = await taskClaim(d.db, 'idle-maker', { limit: 500, capabilities: [] }); got.length; got = await taskClaim(d.db, 'idle-maker', { limit: 500, capabilities: [] })) {
      await taskCompleteMany(d.db, got.map((t) => ({ taskId: t.id, fence: t.fence, output: null })));
    }
  }
  const per = total / tenants;
  for (const id of ids) {
    const tasks = Array.from({ length: per }, (_, j) => task(`k${j}`, [], { estimatedTokens: 100 + ((j * 37) % 1900) }));
    await dagSubmit(d.db, [{ name: `work-${id}`, params: {}, tasks }], { tenant: id });
  }
  await analyze(d);
  await agentRegister(d.db, { id: 'tenant-claimer', type: 'bench', capabilities: [], maxConcurrent: 1 });
  const ms: number[] = [];
  // The share loop folds what claims logged every 250 ms in a running deployment, about 50 of these claims: so does
  // this loop, untimed (left unfolded, the log each claim sums would grow by one row per claim for the whole run).
  const share = tenantShareCreate({ db: d.db });
  // The first claim meets many tenants and switches this process to the fair-share statement: not timed.
  for (let i = 0; i < claims + 1; i++) {
    if (i % 50 === 0) await share.runOnce();
    const t0 = performance.now();
    const [t] = await taskClaim(d.db, 'tenant-claimer', { limit: 1, capabilities: [] });
    if (i > 0) ms.push(performance.now() - t0);
    if (!t) throw new Error(`tenant claim ${i} got nothing`);
    await taskCompleteMany(d.db, [{ taskId: t.id, fence: t.fence, output: null }]);
  }
  return ms;
}

/**
 * Fair share over a run: `tenants` tenants with equal backlogs in tokens (tenant i's tasks are (i+1) × 250 tokens,
 * weights 1, or 1 to 4 with `weighted`), `agents` concurrent claimers of 1 completing at once, the share loop running.
 * Returns Jain's index of the tokens each was served (per weight) while every tenant still had work.
 */
export async function tenantFairness(d: Database, tenants: number, tokensEach: number, agents: number, weighted: boolean): Promise<{ jain: number; tasks: number; seconds: number }> {
  const ids = Array.from({ length: tenants }, (_, i) => `f${i}`);
  const weight = (i: number) => (weighted ? 1 + (i % 4) : 1);
  await tenantsFresh(d, ids, weight);
  for (const [i, id] of ids.entries()) {
    const size = (i + 1) * 250;
    const tasks = Array.from({ length: Math.ceil(tokensEach * weight(i) / size) }, (_, j) => task(`k${j}`, [], { estimatedTokens: size }));
    await dagSubmit(d.db, [{ name: `fair-${id}`, params: {}, tasks }], { tenant: id });
  }
  await analyze(d);
  const share = tenantShareCreate({ db: d.db });
  share.start();
  const t0 = performance.now();
  let done = 0;
  try {
    await Promise.all(Array.from({ length: agents }, async (_, a) => {
      const id = `fair-agent-${a}`;
      await agentRegister(d.db, { id, type: 'bench', capabilities: [], maxConcurrent: 1 });
      for (;;) {
        const [t] = await taskClaim(d.db, id, { limit: 1, capabilities: [] });
        if (!t) return;
        await taskCompleteMany(d.db, [{ taskId: t.id, fence: t.fence, output: null }]);
        done++;
      }
    }));
  } finally {
    await share.stop();
  }
  const seconds = (performance.now() - t0) / 1000;
  const { rows } = await d.db.execute(sql`
    with window_end as (select min(at) as at from (select tenant_id, max(claimed_at) as at from tasks group by tenant_id) l)
    select tenant_id, sum(estimated_tokens)::float8 as tokens from tasks
    where claimed_at <= (select at from window_end) and tenant_id = any(${textArray(ids)}) group by tenant_id`);
  const by = new Map((rows as Array<{ tenant_id: string; tokens: number }>).map((r) => [r.tenant_id, r.tokens]));
  return { jain: jainIndex(ids.map((id) => by.get(id) ?? 0), ids.map((_, i) => weight(i))), tasks: done, seconds };
}
