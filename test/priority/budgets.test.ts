import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { cliWith } from '../helpers/cli.js';
import { agentCreate, dagCreate, databaseReset, rowsOf } from '../helpers/factories.js';
import { taskClaim, type ClaimedTask } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { taskRelease } from '../../src/engine/attempt/release.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { dagCancel } from '../../src/engine/dag/cancel.js';
import { usageReport } from '../../src/engine/attempt/usage.js';

const database = await testDatabase({ poolSize: 40 });
const { db } = database;
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
beforeEach(() => databaseReset(db));

function tasksYaml(name: string, n: number, maxCost: number, budget?: number): string {
  const lines = [`name: ${name}`, ...(budget !== undefined ? [`budget_usd: ${budget}`] : []), 'defaults: { retry: { strategy: immediate }, max_attempts: 5 }', 'tasks:'];
  for (let i = 0; i < n; i++) lines.push(`  t${i}: { type: t, spec: { constraints: { max_cost_usd: ${maxCost} } } }`);
  return lines.join('\n');
}

/** `claimers` loops, each on its own pooled connection, claiming as `agentOf(i)` until three claims in a row come back empty. */
async function claimStorm(claimers: number, agentOf: (i: number) => string): Promise<ClaimedTask[]> {
  const got: ClaimedTask[] = [];
  await Promise.all(Array.from({ length: claimers }, async (_, i) => {
    for (let empty = 0; empty < 3;) {
      const c = await taskClaim(db, agentOf(i), { limit: 2 });
      if (c.length === 0) empty++;
      got.push(...c);
    }
  }));
  return got;
}

interface Ledger { id: string; budget: number | null; spent: number; reserved: number; held: number }
/** Each agent's and DAG's ledger, with what its leased tasks actually hold. */
async function ledgers() {
  const agents = await rowsOf<Ledger>(db, sql`
    select a.id, a.budget_usd::float8 as budget, a.spent_usd::float8 as spent, a.reserved_usd::float8 as reserved,
      coalesce((select sum(t.reserved_usd) from tasks t where t.claimed_by = a.id and t.status in ('claimed', 'running')), 0)::float8 as held
    from agents a order by a.id`);
  const dags = await rowsOf<Ledger>(db, sql`
    select g.id, g.budget_usd::float8 as budget, g.spent_usd::float8 as spent, g.reserved_usd::float8 as reserved,
      coalesce((select sum(t.reserved_usd) from tasks t where t.dag_id = g.id and t.status in ('claimed', 'running')), 0)::float8 as held
    from dags g order by g.id`);
  for (const l of [...agents, ...dags]) {
    expect(l.reserved).toBeCloseTo(l.held, 6);
    if (l.budget !== null) expect(l.spent + l.reserved).toBeLessThanOrEqual(l.budget + 1e-9);
  }
  return { agents, dags };
}

describe('budgets: reservations at claim, settlement at the end of the attempt', () => {
  it('16 concurrent claimers of one agent never reserve past its budget', async () => {
    await dagCreate(db, tasksYaml('many', 40, 0.5));
    await agentCreate(db, 'thrifty', [], 3);
    const claimed = await claimStorm(16, () => 'thrifty');
    expect(claimed).toHaveLength(6); // 6 × 0.5 = 3.0
    expect(new Set(claimed.map((c) => c.id)).size).toBe(6);
    const { agents } = await ledgers();
    expect(agents[0]).toMatchObject({ reserved: 3, spent: 0 });
  });

  it('16 concurrent claimers on 16 agents never reserve past one DAG ceiling, and costs settle exactly', async () => {
    const dagId = await dagCreate(db, tasksYaml('capped', 40, 0.5, 6));
    for (let i = 0; i < 16; i++) await agentCreate(db, `a${i}`, [], 100);
    const claimed = await claimStorm(16, (i) => `a${i}`);
    expect(claimed).toHaveLength(12); // 12 × 0.5 = 6.0
    let { dags } = await ledgers();
    expect(dags[0]).toMatchObject({ reserved: 6, spent: 0 });

    // Settle: 8 complete at $0.30, 2 fail at $0.20 (retried), 1 is released at $0.10, 1 is cancelled with its DAG later.
    const [completeNow, failNow, releaseNow] = [claimed.slice(0, 8), claimed.slice(8, 10), claimed.slice(10, 11)];
    const agentOf = (t: ClaimedTask) => rowsOf<{ a: string }>(db, sql`select claimed_by as a from tasks where id = ${t.id}`).then((r) => r[0]!.a);
    for (const t of completeNow) await taskComplete(db, { taskId: t.id, fence: t.fence, output: null, costUsd: 0.3 });
    for (const t of failNow) await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'error', message: 'boom', costUsd: 0.2 });
    const releasedBy = await agentOf(releaseNow[0]!);
    for (const t of releaseNow) await taskRelease(db, { taskId: t.id, fence: t.fence, costUsd: 0.1 });
    ({ dags } = await ledgers());
    // spent 8 × 0.3 + 2 × 0.2 + 0.1 = 2.9; one task still holds 0.5.
    expect(dags[0]!.spent).toBeCloseTo(2.9, 6);
    expect(dags[0]!.reserved).toBeCloseTo(0.5, 6);
    const released = (await ledgers()).agents.find((a) => a.id === releasedBy)!;
    expect(released.spent).toBeGreaterThanOrEqual(0.1);

    // What is left (6 − 2.9 − 0.5 = 2.6) admits exactly 5 more tasks at 0.5.
    const more = await claimStorm(16, (i) => `a${i}`);
    expect(more).toHaveLength(5);
    ({ dags } = await ledgers());
    expect(dags[0]!.reserved).toBeCloseTo(3, 6);

    await dagCancel(db, dagId);
    const after = await ledgers();
    expect(after.dags[0]).toMatchObject({ reserved: 0 });
    expect(after.dags[0]!.spent).toBeCloseTo(2.9, 6);
    expect(after.agents.reduce((s, a) => s + a.reserved, 0)).toBe(0);
    expect(after.agents.reduce((s, a) => s + a.spent, 0)).toBeCloseTo(2.9, 6);
    const attempts = await rowsOf<{ total: number }>(db, sql`select sum(cost_usd)::float8 as total from attempts`);
    expect(attempts[0]!.total).toBeCloseTo(2.9, 6);
  });

  it('lists unclaimable tasks with the reason, and costs per day, agent and DAG', async () => {
    await agentCreate(db, 'poor', ['llm'], 1);
    await agentCreate(db, 'rich', ['llm'], 50);
    await db.execute(sql`update agents set spent_usd = 49 where id = 'rich'`);
    await dagCreate(db, `
name: stuck
tasks:
  gpu: { type: t, spec: { constraints: { capabilities: [gpu] } } }
  pricey: { type: t, spec: { constraints: { capabilities: [llm], max_cost_usd: 5 } } }
  fine: { type: t, spec: { constraints: { capabilities: [llm], max_cost_usd: 0.5 } } }
`);
    await dagCreate(db, `
name: capped
budget_usd: 1
tasks:
  big: { type: t, spec: { constraints: { capabilities: [llm], max_cost_usd: 2 } } }
`);
    const r = await cli('tasks', '--unclaimable', '--json');
    expect(r.code).toBe(0);
    const rows = (r.json() as Array<{ key: string; reason: string; detail: string }>).map((x) => [x.key, x.reason, x.detail]).sort();
    expect(rows).toEqual([
      ['big', 'dag_budget', 'DAG budget: $1.0000 left, the task may cost $2.0000'],
      ['gpu', 'no_capable_agent', 'no active agent has capabilities gpu'],
      ['pricey', 'no_agent_can_afford', 'no capable agent can afford $5.0000 (most left: $1.0000)'],
    ]);
    const human = await cli('tasks', '--unclaimable');
    expect(human.stdout).toMatch(/gpu\s+\d+s\s+no active agent has capabilities gpu/);

    const [fine] = await taskClaim(db, 'poor');
    expect(fine!.key).toBe('fine');
    await taskComplete(db, { taskId: fine!.id, fence: fine!.fence, output: null, costUsd: 0.25 });
    const costs = (await cli('costs', '--json')).json() as { days: Array<{ costUsd: number }>; agents: Array<{ id: string; spentUsd: number; reservedUsd: number; remainingUsd: number }>; dags: Array<{ name: string; spentUsd: number }> };
    expect(costs.days.at(-1)!.costUsd).toBeCloseTo(0.25);
    expect(costs.agents.find((a) => a.id === 'poor')).toMatchObject({ spentUsd: 0.25, reservedUsd: 0, remainingUsd: 0.75 });
    expect(costs.dags.find((d) => d.name === 'stuck')!.spentUsd).toBeCloseTo(0.25);
    expect((await cli('costs')).stdout).toMatch(/poor\s+\$1\.0000\s+\$0\.2500\s+\$0\.0000\s+\$0\.7500/);
    // An attempt running with reported usage, and one a spend limit stopped: seen with their figures.
    await agentCreate(db, 'spender', ['pay']);
    await dagCreate(db, 'name: paying\ntasks:\n  run: { type: t, spec: { constraints: { capabilities: [pay], max_cost_usd: 1 } } }\n  stop: { type: t, spec: { constraints: { capabilities: [pay], max_cost_usd: 0.1 } } }\n');
    const held = await taskClaim(db, 'spender', { limit: 2, start: true });
    const [running, stopped] = ['run', 'stop'].map((k) => held.find((t) => t.key === k)!);
    await usageReport(db, { taskId: running!.id, fence: running!.fence }, { reportKey: 'a', costUsd: 0.3 });
    await usageReport(db, { taskId: stopped!.id, fence: stopped!.fence }, { reportKey: 'b', costUsd: 0.2 });
    const live = (await cli('costs', '--json')).json() as { running: Array<{ key: string; spentUsd: number; reservedUsd: number; maxCostUsd: number }>; stops: Array<{ taskId: string; limit: string; limitUsd: number; spentUsd: number }>; models: unknown[] };
    expect(live.running.map((t) => [t.key, t.spentUsd, t.reservedUsd, t.maxCostUsd])).toEqual([['run', 0.3, 0.7, 1]]);
    expect(live.stops).toEqual([expect.objectContaining({ taskId: stopped!.id, limit: 'task.max_cost_usd', limitUsd: 0.1, spentUsd: 0.2 })]);
    const shown = (await cli('costs')).stdout;
    expect(shown).toMatch(new RegExp(String.raw`^\s*${running!.id}\s+run\s+spender\s+\$0\.3000\s+\$0\.7000\s+\$1\.0000\s*$`, 'm'));
    expect(shown).toMatch(new RegExp(String.raw`^\s*\S+Z\s+${stopped!.id}\s+spender\s+task\.max_cost_usd \$0\.1000\s+\$0\.2000\s*$`, 'm'));
    // The ledger by model: both reports named none ('-'), neither of unknown cost.
    expect(live.models).toEqual([{ model: '', costUsd: 0.5, tokensIn: 0, tokensOut: 0, reports: 2, unpricedReports: 0 }]);
    expect(shown).toMatch(/^\s*-\s+\$0\.5000\s+0\s+0\s+2\s+0\s*$/m);
  });
});
