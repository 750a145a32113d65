import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, databaseSnapshot, leaseExpire, rowsOf } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { usageBudget, usageReport } from '../../src/engine/attempt/usage.js';
import { stepRecord } from '../../src/engine/attempt/steps.js';
import { attemptListForTask } from '../../src/db/queries/attempts.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import type { BudgetView } from '../../src/index.js';

// Usage reported while an attempt runs: written and charged when reported, once per report key, and held to the
// attempt's limits on every report.
const database = await testDatabase();
const { db } = database;
const { run } = agentRunners(database);
beforeEach(() => databaseReset(db));

const DAG = (o: { maxCost?: number; budget?: number; retryOn?: string } = {}) => `name: usage
${o.budget !== undefined ? `budget_usd: ${o.budget}\n` : ''}defaults: { max_attempts: 3, retry: { strategy: immediate${o.retryOn ? `, retry_on: [${o.retryOn}]` : ''} } }
tasks:
  t: { type: t, spec: { constraints: { capabilities: [usage]${o.maxCost !== undefined ? `, max_cost_usd: ${o.maxCost}` : ''} } } }
`;

async function claimed(o: Parameters<typeof DAG>[0] = {}) {
  await agentCreate(db, 'a1', ['usage']);
  const dagId = await dagCreate(db, DAG(o));
  const [t] = await taskClaim(db, 'a1', { start: true });
  return { t: t!, dagId, ref: { taskId: t!.id, fence: t!.fence } };
}
const money = (dagId: string) => rowsOf<{ task_cost: number; task_reserved: number; dag_spent: number; dag_reserved: number; agent_spent: number }>(db, sql`
  select t.cost_usd::float8 as task_cost, t.reserved_usd::float8 as task_reserved, g.spent_usd::float8 as dag_spent,
    g.reserved_usd::float8 as dag_reserved, a.spent_usd::float8 as agent_spent
  from tasks t join dags g on g.id = t.dag_id join agents a on a.id = 'a1' where t.dag_id = ${dagId}`).then((r) => r[0]!);

describe('usage reported while an attempt runs', () => {
  it('is charged when reported (the claim\'s reservation becomes spend), once per report key, and the attempt\'s row carries it when it ends', async () => {
    const { t, dagId, ref } = await claimed({ maxCost: 1, budget: 5 });
    expect(await money(dagId)).toEqual({ task_cost: 0, task_reserved: 1, dag_spent: 0, dag_reserved: 1, agent_spent: 0 });
    const first = await usageReport(db, ref, { reportKey: 'r1', costUsd: 0.25, tokensIn: 100, tokensOut: 10, cachedReadTokens: 50, model: 'm' });
    expect(first).toEqual({ applied: true, attempt: { costUsd: 0.25, tokensIn: 100, tokensOut: 10 }, remainingUsd: 0.75, remainingTokens: null, low: null, stopped: null });
    // Sent again after a lost reply: answered, not charged twice.
    expect(await usageReport(db, ref, { reportKey: 'r1', costUsd: 0.25, tokensIn: 100, tokensOut: 10 })).toMatchObject({ applied: false, attempt: { costUsd: 0.25 } });
    // 0.75 of 1: not yet low (80 %).
    expect((await usageReport(db, ref, { reportKey: 'r2', costUsd: 0.5, tokensIn: 20 })).low).toBeNull();
    expect(await usageBudget(db, ref)).toEqual({ attempt: { costUsd: 0.75, tokensIn: 120, tokensOut: 10 }, remainingUsd: 0.25, remainingTokens: null, low: null });
    expect(await money(dagId)).toEqual({ task_cost: 0.75, task_reserved: 0.25, dag_spent: 0.75, dag_reserved: 0.25, agent_spent: 0.75 });
    const ledger = await rowsOf(db, sql`select report_key, fence, cost_usd::float8 as cost, tokens_in::int as tin, cached_read_tokens::int as cached, model from usage_reports order by id`);
    expect(ledger).toEqual([
      { report_key: 'r1', fence: t.fence, cost: 0.25, tin: 100, cached: 50, model: 'm' },
      { report_key: 'r2', fence: t.fence, cost: 0.5, tin: 20, cached: 0, model: null },
    ]);
    // The completion charges only what it reports itself, and records the attempt's whole usage.
    await taskComplete(db, { ...ref, output: 'ok', costUsd: 0.1, tokensIn: 1 });
    expect(await money(dagId)).toEqual({ task_cost: 0.85, task_reserved: 0.25, dag_spent: 0.85, dag_reserved: 0, agent_spent: 0.85 });
    expect((await attemptListForTask(db, t.id)).map((a) => [a.outcome, a.costUsd, a.tokensIn])).toEqual([['completed', 0.85, 121]]);
  });

  it('a report past the task\'s max_cost_usd is charged and stops the attempt: failed budget_exceeded, dead-lettered, later reports refused', async () => {
    const { t, dagId, ref } = await claimed({ maxCost: 0.1 });
    for (let i = 1; i <= 10; i++) {
      const r = await usageReport(db, ref, { reportKey: `call ${i}`, costUsd: 0.01 });
      expect(r.stopped).toBeNull();
      // Low from 80 % of the limit on: 0.08.
      expect(r.low?.limit ?? null).toBe(i >= 8 ? 'task.max_cost_usd' : null);
    }
    const eleventh = await usageReport(db, ref, { reportKey: 'call 11', costUsd: 0.01 });
    expect(eleventh.stopped).toEqual({ limit: 'task.max_cost_usd', limitUsd: 0.1, spentUsd: 0.11 });
    expect(eleventh.remainingUsd).toBe(0);
    const [task] = await rowsOf<{ status: string; last_error: string }>(db, sql`select status, last_error from tasks where id = ${t.id}`);
    expect(task!.status).toBe('dead_lettered');
    expect(task!.last_error).toMatch(/task\.max_cost_usd 0\.1 reached: 0\.11 USD spent/);
    const [attempt] = await attemptListForTask(db, t.id);
    expect([attempt!.outcome, attempt!.errorClass, attempt!.costUsd]).toEqual(['failed', 'budget_exceeded', 0.11]);
    // Later reports and step writes of the stopped attempt are refused, naming the limit.
    await expect(usageReport(db, ref, { reportKey: 'call 12', costUsd: 0.01 })).rejects.toMatchObject({
      code: 'BUDGET_EXCEEDED', message: /stopped at task\.max_cost_usd 0\.1 \(0\.11 USD spent\)/,
    });
    await expect(stepRecord(db, { ...ref, name: 'late', result: 1 })).rejects.toMatchObject({ code: 'BUDGET_EXCEEDED' });
    // Its own event, which webhooks may subscribe to.
    expect(await rowsOf(db, sql`select task_id, agent_id, data from events where type = 'task.budget_exceeded'`)).toEqual([
      { task_id: t.id, agent_id: 'a1', data: { limit: 'task.max_cost_usd', limitUsd: 0.1, spentUsd: 0.11, fence: t.fence } },
    ]);
    expect((await money(dagId)).dag_spent).toBeCloseTo(0.11);
  });

  it('the DAG\'s budget holds every attempt\'s reports together; retry_on naming budget_exceeded retries', async () => {
    const { t, ref } = await claimed({ budget: 0.3, retryOn: 'budget_exceeded' });
    expect((await usageReport(db, ref, { reportKey: 'a', costUsd: 0.2 })).remainingUsd).toBeCloseTo(0.1);
    const over = await usageReport(db, ref, { reportKey: 'b', costUsd: 0.2 });
    expect(over.stopped).toMatchObject({ limit: 'dag.budget_usd', limitUsd: 0.3 });
    const [task] = await rowsOf<{ status: string }>(db, sql`select status from tasks where id = ${t.id}`);
    expect(task!.status).not.toBe('dead_lettered');
  });

  it('refuses what a hostile or stale agent sends, naming the field, and changes nothing', async () => {
    const { t, ref } = await claimed({ maxCost: 1 });
    const before = await databaseSnapshot(db);
    for (const [bad, field] of [
      [{ costUsd: -1 }, 'cost_usd'], [{ costUsd: Number.NaN }, 'cost_usd'], [{ costUsd: Infinity }, 'cost_usd'], [{ costUsd: 1e12 }, 'cost_usd'],
      [{ tokensIn: -5 }, 'tokens_in'], [{ tokensOut: 1.5 }, 'tokens_out'], [{ cachedReadTokens: 1e15 }, 'cached_read_tokens'],
    ] as const) {
      await expect(usageReport(db, ref, { reportKey: 'k', ...bad })).rejects.toMatchObject({ code: 'INVALID_INPUT', details: { field } });
    }
    await expect(usageReport(db, ref, { reportKey: '' })).rejects.toMatchObject({ details: { field: 'report_key' } });
    await expect(usageReport(db, ref, { reportKey: 'a\nb' })).rejects.toMatchObject({ details: { field: 'report_key' } });
    await expect(usageReport(db, { taskId: t.id, fence: t.fence + 1 }, { reportKey: 'k', costUsd: 1 })).rejects.toMatchObject({ code: 'LEASE_LOST' });
    await expect(usageReport(db, { taskId: 'no-such-task', fence: 1 }, { reportKey: 'k', costUsd: 1 })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await databaseSnapshot(db)).toBe(before);
    // A lapsed lease, not yet taken back: what its holder spent is still charged (to the attempt the reaper will end).
    await leaseExpire(db, t.id);
    expect((await usageReport(db, ref, { reportKey: 'late', costUsd: 0.5 })).attempt.costUsd).toBe(0.5);
    expect(await rowsOf(db, sql`select report_key from usage_reports`)).toEqual([{ report_key: 'late' }]);
  });
});

describe('one DAG budget, eight agents reporting at once', () => {
  it('stops every attempt past the budget; the spend passes it by at most one report per attempt, and the ledger and the DAG agree', async () => {
    const agents = Array.from({ length: 8 }, (_, i) => `a${i}`);
    for (const id of agents) await agentCreate(db, id, ['usage']);
    const dagId = await dagCreate(db, `name: shared\nbudget_usd: 1\ntasks:\n${agents.map((_, i) => `  t${i}: { type: t, spec: { constraints: { capabilities: [usage] } } }`).join('\n')}\n`);
    const held = await Promise.all(agents.map(async (id) => (await taskClaim(db, id, { start: true }))[0]!));
    expect(held).toHaveLength(8);
    // Each agent reports 0.05 at a time, as fast as it can, on its own connection, until a report stops it.
    const reports = await Promise.all(held.map(async (t) => {
      let n = 0;
      for (;;) {
        const r = await usageReport(db, { taskId: t.id, fence: t.fence }, { reportKey: `r${n++}`, costUsd: 0.05 });
        if (r.stopped) return { n, stopped: r.stopped };
      }
    }));
    for (const r of reports) expect(r.stopped.limit).toBe('dag.budget_usd');
    const [spend] = await rowsOf<{ spent: number; ledger: number; reports: number }>(db, sql`
      select (select spent_usd::float8 from dags where id = ${dagId}) as spent, sum(cost_usd)::float8 as ledger, count(*)::int as reports from usage_reports`);
    expect(spend!.ledger).toBeCloseTo(spend!.spent, 9);
    expect(spend!.reports).toBe(reports.reduce((s, r) => s + r.n, 0));
    // The budget, plus at most the one report of each attempt that passed it.
    expect(spend!.spent).toBeGreaterThan(1);
    expect(spend!.spent).toBeLessThanOrEqual(1 + 8 * 0.05 + 1e-9);
    const failed = await rowsOf<{ error_class: string }>(db, sql`select error_class from attempts where dag_id = ${dagId}`);
    expect(failed.map((a) => a.error_class)).toEqual(Array(8).fill('budget_exceeded'));
  });
});

describe('the budget in a TypeScript handler', () => {
  it('ctx.onBudgetLow fires once at 80 % of a limit, ctx.budget follows the reports and budget reads, ctx.budgetFits says whether a call fits', async () => {
    const seen: { low: BudgetView[]; budgets: Array<number | null>; fits: boolean[] } = { low: [], budgets: [], fits: [] };
    const dagId = await dagCreate(db, DAG({ maxCost: 0.1 }));
    await run(defineAgent({
      name: 'careful', capabilities: ['usage'],
      async run(_task, ctx) {
        ctx.onBudgetLow((b) => seen.low.push(b));
        seen.budgets.push(ctx.budget.remainingUsd);
        // A budget read before any report: ctx.budget says what it read.
        seen.fits.push(await ctx.budgetFits(0.5));
        seen.budgets.push(ctx.budget.remainingUsd);
        for (let i = 0; i < 3; i++) {
          await ctx.reportCost({ usd: 0.03, tokens: { input: 100, output: 5, cachedRead: 60, cacheWrite: 10 }, model: 'm' });
          seen.budgets.push(ctx.budget.remainingUsd);
        }
        seen.fits.push(await ctx.budgetFits(0.02), await ctx.budgetFits(0.01));
        return 'done';
      },
    }), { id: 'careful-1' });
    await eventually('completed', async () => (await rowsOf<{ status: string }>(db, sql`select status from tasks where dag_id = ${dagId}`))[0]?.status === 'completed');
    expect(seen.budgets.map((b) => (b === null ? null : Math.round(b * 100) / 100))).toEqual([null, 0.1, 0.07, 0.04, 0.01]);
    expect(seen.low).toHaveLength(1);
    expect(seen.low[0]!.low).toEqual({ limit: 'task.max_cost_usd', limitUsd: 0.1, spentUsd: 0.09 });
    expect(seen.fits).toEqual([false, false, true]);
    // Input, output, cache-read and cache-write tokens kept apart in the ledger.
    expect(await rowsOf(db, sql`select sum(tokens_in)::int as i, sum(tokens_out)::int as o, sum(cached_read_tokens)::int as r, sum(cache_write_tokens)::int as w from usage_reports`))
      .toEqual([{ i: 300, o: 15, r: 180, w: 30 }]);
  });
});
