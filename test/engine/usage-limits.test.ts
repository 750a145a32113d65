import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, leaseLapsedReaped, rowsOf } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { usageBudget, usageReport } from '../../src/engine/attempt/usage.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { dagStatusRefresh } from '../../src/db/queries/dags.js';
import { dagSourceLoad } from '../../src/dag/load.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';

// The limits a usage report is held to beside max_cost_usd and the budgets: a task's max_tokens, daily caps of a DAG
// and of an agent (UTC day), the DAG's own low threshold; and a cost reported as unknown.
const database = await testDatabase();
const { db } = database;
beforeEach(() => databaseReset(db));

const yaml = (o: { top?: string; constraints?: string; tasks?: number } = {}) => `name: limits
${o.top ?? ''}
tasks:
${Array.from({ length: o.tasks ?? 1 }, (_, i) => `  t${i}: { type: t, spec: { constraints: { capabilities: [paid]${o.constraints ? `, ${o.constraints}` : ''} } } }`).join('\n')}
`;

async function claimOne(agent = 'a1') {
  const [t] = await taskClaim(db, agent, { start: true });
  return t ? { taskId: t.id, fence: t.fence } : undefined;
}
const attemptOf = (taskId: string) => rowsOf<{ outcome: string; error_class: string | null; details: { budget?: unknown } | null }>(db, sql`
  select outcome, error_class, details from attempts where task_id = ${taskId} order by attempt`);
// The next UTC day, as far as the spend counters can tell: today's spend was spent yesterday.
const dayPasses = () => db.execute(sql`update dags set spend_day = spend_day - 1 where spend_day is not null; update agents set spend_day = spend_day - 1 where spend_day is not null`);

describe('a task\'s max_tokens', () => {
  it('counts tokens in and out per attempt, says what is left, and stops the attempt past it whatever the cost', async () => {
    await agentCreate(db, 'a1', ['paid']);
    await dagCreate(db, yaml({ constraints: 'max_tokens: 1000' }));
    const ref = (await claimOne())!;
    const first = await usageReport(db, ref, { reportKey: 'r1', tokensIn: 500, tokensOut: 100 });
    expect([first.remainingTokens, first.remainingUsd, first.low, first.stopped]).toEqual([400, null, null, null]);
    const low = await usageReport(db, ref, { reportKey: 'r2', tokensIn: 250 });
    expect([low.remainingTokens, low.low]).toEqual([150, { limit: 'task.max_tokens', limitTokens: 1000, spentTokens: 850 }]);
    // Exactly at the limit is allowed; past it stops, even at no cost.
    expect((await usageReport(db, ref, { reportKey: 'r3', tokensOut: 150 })).stopped).toBeNull();
    const past = await usageReport(db, ref, { reportKey: 'r4', tokensOut: 1 });
    expect(past.stopped).toEqual({ limit: 'task.max_tokens', limitTokens: 1000, spentTokens: 1001 });
    expect(await attemptOf(ref.taskId)).toEqual([{ outcome: 'failed', error_class: 'budget_exceeded', details: expect.objectContaining({ budget: past.stopped }) }]);
    await expect(usageReport(db, ref, { reportKey: 'r5', tokensOut: 1 })).rejects.toMatchObject({ code: 'BUDGET_EXCEEDED', message: expect.stringContaining('task.max_tokens 1000 reached: 1001 tokens spent') });
  });

  it('is refused in a DAG file unless a whole number from 1, naming the field (and the new DAG fields too)', async () => {
    for (const bad of ['0', '-5', '1.5', '"many"']) {
      await expect(dagSourceLoad(yaml({ constraints: `max_tokens: ${bad}` }), 'limits.yaml')).rejects.toThrow(/limits\.yaml:\d+.*max_tokens/s);
    }
    await expect(dagSourceLoad(yaml({ top: 'budget_low_at: 1.5' }), 'limits.yaml')).rejects.toThrow(/budget_low_at/);
    await expect(dagSourceLoad(yaml({ top: 'daily_budget_usd: -1' }), 'limits.yaml')).rejects.toThrow(/daily_budget_usd/);
  });
});

describe('a cost reported as unknown', () => {
  it('is kept as unknown in the ledger (never as 0), charges nothing, and its tokens count', async () => {
    await agentCreate(db, 'a1', ['paid']);
    const dagId = await dagCreate(db, yaml({ top: 'budget_usd: 1', constraints: 'max_tokens: 100' }));
    const ref = (await claimOne())!;
    const a = await usageReport(db, ref, { reportKey: 'r1', costUsd: null, tokensIn: 60, model: 'local/unpriced' });
    expect([a.attempt, a.remainingTokens, a.remainingUsd]).toEqual([{ costUsd: 0, tokensIn: 60, tokensOut: 0 }, 40, 1]);
    expect(await rowsOf(db, sql`select model, cost_usd, tokens_in::int from usage_reports`)).toEqual([{ model: 'local/unpriced', cost_usd: null, tokens_in: 60 }]);
    expect(await rowsOf(db, sql`select spent_usd::float8 as spent from dags where id = ${dagId}`)).toEqual([{ spent: 0 }]);
    // Its tokens still stop the attempt at max_tokens.
    expect((await usageReport(db, ref, { reportKey: 'r2', costUsd: null, tokensIn: 41 })).stopped).toMatchObject({ limit: 'task.max_tokens' });
  });
});

describe('daily caps (UTC day)', () => {
  it('a DAG\'s daily_budget_usd stops the attempt that passes it; claims pass the DAG over, it shows blocked, and the next day it runs again', async () => {
    await agentCreate(db, 'a1', ['paid']);
    // Retried when stopped at a limit, so the stopped task waits with the others instead of being dead-lettered.
    const dagId = await dagCreate(db, yaml({ top: 'daily_budget_usd: 1\ndefaults: { max_attempts: 3, retry: { strategy: immediate, retry_on: [budget_exceeded] } }', tasks: 3 }));
    const ref = (await claimOne())!;
    expect((await usageReport(db, ref, { reportKey: 'r1', costUsd: 0.7 })).remainingUsd).toBe(0.3);
    const past = await usageReport(db, ref, { reportKey: 'r2', costUsd: 0.4 });
    expect(past.stopped).toEqual({ limit: 'dag.daily_budget_usd', limitUsd: 1, spentUsd: 1.1 });
    // The other tasks wait: no claim takes them today, and the DAG says why.
    expect(await claimOne()).toBeUndefined();
    await dagStatusRefresh(db, [dagId]);
    expect(await rowsOf(db, sql`select status, blocked_reason from dags where id = ${dagId}`))
      .toEqual([{ status: 'blocked', blocked_reason: expect.stringContaining('daily cap $1.0000 spent today') }]);
    await dayPasses();
    const next = await claimOne();
    expect(next).toBeDefined();
    // A new day's count starts at the report, not at yesterday's total.
    expect((await usageReport(db, next!, { reportKey: 'r1', costUsd: 0.5 })).remainingUsd).toBe(0.5);
    await dagStatusRefresh(db, [dagId]);
    expect(await rowsOf(db, sql`select status, spent_usd::float8 as spent from dags where id = ${dagId}`)).toEqual([{ status: 'running', spent: 1.6 }]);
  });

  it('an agent\'s daily cap stops its attempt and it claims nothing more that day; the DAG\'s budget_low_at says low sooner', async () => {
    await agentRegister(db, { id: 'a1', type: 'test', capabilities: ['paid'], dailyBudgetUsd: 0.5, maxConcurrent: 10 });
    await dagCreate(db, yaml({ top: 'budget_low_at: 0.5', constraints: 'max_cost_usd: 1', tasks: 3 }));
    // The claim already holds the agent to what is left of its day: max_cost_usd 1 does not fit 0.5.
    expect(await claimOne()).toBeUndefined();
    await db.execute(sql`update tasks set max_cost_usd = null`);
    const ref = (await claimOne())!;
    const low = await usageReport(db, ref, { reportKey: 'r1', costUsd: 0.3 });
    expect([low.low, low.stopped]).toEqual([{ limit: 'agent.daily_budget_usd', limitUsd: 0.5, spentUsd: 0.3 }, null]);
    expect((await usageBudget(db, ref)).remainingUsd).toBe(0.2);
    expect((await usageReport(db, ref, { reportKey: 'r2', costUsd: 0.3 })).stopped).toEqual({ limit: 'agent.daily_budget_usd', limitUsd: 0.5, spentUsd: 0.6 });
    expect(await claimOne()).toBeUndefined();
    await dayPasses();
    expect(await claimOne()).toBeDefined();
  });
});

/** The error a call was refused with (a call that answered fails the test). */
async function refusalOf(p: Promise<unknown>): Promise<{ code: string; details: Record<string, unknown> }> {
  try {
    await p;
  } catch (err) {
    return err as { code: string; details: Record<string, unknown> };
  }
  throw new Error('expected a refusal');
}

describe('a report that arrives after its attempt ended', () => {
  const reaper = reaperCreate({ db });
  const ledger = () => rowsOf<{ report_key: string; fence: number; cost: number }>(db, sql`select report_key, fence, cost_usd::float8 as cost from usage_reports order by id`);
  const spend = (dagId: string) => rowsOf<{ dag: number; agent: number; attempt: number; task: number }>(db, sql`
    select g.spent_usd::float8 as dag, (select spent_usd::float8 from agents where id = 'a1') as agent,
      (select cost_usd::float8 from attempts where dag_id = g.id) as attempt, (select cost_usd::float8 from tasks where dag_id = g.id) as task
    from dags g where g.id = ${dagId}`).then((r) => r[0]);

  it('is charged to that attempt when it was the reporter\'s and recent: the refusal stands and says so; once per report key', async () => {
    await agentCreate(db, 'a1', ['paid']);
    await agentCreate(db, 'a2', ['paid']);
    const dagId = await dagCreate(db, yaml({ top: 'defaults: { max_attempts: 3, retry: { strategy: immediate } }' }));
    const ref = (await claimOne())!;
    await usageReport(db, ref, { reportKey: 'r1', costUsd: 0.1 });
    await leaseLapsedReaped(db, reaper, 'a1');
    // The call it was paying for when its lease was taken back: charged, and still refused (the attempt is over).
    const late = usageReport(db, ref, { reportKey: 'r2', costUsd: 0.25, tokensIn: 40 }, { agentId: 'a1' });
    await expect(late).rejects.toMatchObject({
      code: 'LEASE_LOST', message: expect.stringContaining('charged to the attempt that ended'),
      details: { lateCharged: { applied: true, attempt: { costUsd: 0.35, tokensIn: 40, tokensOut: 0 } } },
    });
    expect(await spend(dagId)).toEqual({ dag: 0.35, agent: 0.35, attempt: 0.35, task: 0.35 });
    // Sent again after a lost reply: charged once.
    await expect(usageReport(db, ref, { reportKey: 'r2', costUsd: 0.25 }, { agentId: 'a1' })).rejects.toMatchObject({ details: { lateCharged: { applied: false } } });
    // Another agent cannot charge a1's attempt, and a report without an agent is refused as before.
    for (const agentId of ['a2', undefined]) {
      const refused = await refusalOf(usageReport(db, ref, { reportKey: 'x', costUsd: 5 }, { agentId }));
      expect([refused.code, refused.details.lateCharged]).toEqual(['LEASE_LOST', undefined]);
    }
    expect(await ledger()).toEqual([{ report_key: 'r1', fence: ref.fence, cost: 0.1 }, { report_key: 'r2', fence: ref.fence, cost: 0.25 }]);
    // Too late (USAGE_DEFAULTS.lateReportSec after the end): refused, not in the ledger.
    await db.execute(sql`update attempts set ended_at = now() - interval '2 days'`);
    const tooLate = await refusalOf(usageReport(db, ref, { reportKey: 'r3', costUsd: 1 }, { agentId: 'a1' }));
    expect([tooLate.code, tooLate.details.lateCharged]).toEqual(['LEASE_LOST', undefined]);
    expect((await ledger()).length).toBe(2);
    expect(await spend(dagId)).toEqual({ dag: 0.35, agent: 0.35, attempt: 0.35, task: 0.35 });
  });

  it('after a stop at a limit: charged too, and the answer is still BUDGET_EXCEEDED', async () => {
    await agentCreate(db, 'a1', ['paid']);
    const dagId = await dagCreate(db, yaml({ constraints: 'max_cost_usd: 0.1' }));
    const ref = (await claimOne())!;
    expect((await usageReport(db, ref, { reportKey: 'r1', costUsd: 0.2 }, { agentId: 'a1' })).stopped).toMatchObject({ limit: 'task.max_cost_usd' });
    await expect(usageReport(db, ref, { reportKey: 'r2', costUsd: 0.05 }, { agentId: 'a1' }))
      .rejects.toMatchObject({ code: 'BUDGET_EXCEEDED', details: { lateCharged: { applied: true, attempt: { costUsd: 0.25 } } } });
    expect(await spend(dagId)).toMatchObject({ dag: 0.25, attempt: 0.25 });
  });
});

describe('hostile or unlucky timing', () => {
  it('a late report names only a model its attempt could use; a charge committed after midnight never moves the day back', async () => {
    await agentCreate(db, 'a1', ['paid']);
    const dagId = await dagCreate(db, yaml({ top: 'daily_budget_usd: 5' }));
    const ref = (await claimOne())!;
    await leaseLapsedReaped(db, reaperCreate({ db }), 'a1');
    await refusalOf(usageReport(db, ref, { reportKey: 'late', costUsd: 0.1, model: 'made-up-model-1' }, { agentId: 'a1' }));
    expect(await rowsOf(db, sql`select model, cost_usd::float8 as cost from usage_reports`)).toEqual([{ model: null, cost: 0.1 }]);
    // The DAG's row already counts the next UTC day (a charge of the new day committed first): this one adds to it.
    await db.execute(sql`update dags set spend_day = (now() at time zone 'utc')::date + 1, day_spent_usd = 2 where id = ${dagId}`);
    const ref2 = (await claimOne())!;
    await usageReport(db, ref2, { reportKey: 'r', costUsd: 0.5 });
    expect(await rowsOf(db, sql`select day_spent_usd::float8 as day, spend_day = (now() at time zone 'utc')::date + 1 as next from dags where id = ${dagId}`))
      .toEqual([{ day: 2.5, next: true }]);
  });
});

describe('spend by model', () => {
  it('names the most reported models and sums the rest under one label no model name can be', async () => {
    const { usageByModel, USAGE_OTHER_MODELS } = await import('../../src/db/queries/usage.js');
    await agentCreate(db, 'a1', ['paid']);
    await dagCreate(db, yaml());
    const ref = (await claimOne())!;
    // m00 reported three times, m01 twice, then 50 models once: 52 models, the top 50 by reports named.
    const models = ['m00', 'm00', 'm00', 'm01', 'm01', ...Array.from({ length: 50 }, (_, i) => `m${String(i + 2).padStart(2, '0')}`)];
    for (const [i, model] of models.entries()) await usageReport(db, ref, { reportKey: `r${i}`, costUsd: 0.01, tokensIn: 1, model });
    const rows = await usageByModel(db, 50);
    expect(rows.length).toBe(51);
    expect(rows.find((r) => r.model === 'm00')).toMatchObject({ reports: 3 });
    expect(rows.find((r) => r.model === USAGE_OTHER_MODELS)).toMatchObject({ reports: 2, tokensIn: 2 });
    expect(rows.reduce((n, r) => n + r.reports, 0)).toBe(models.length);
  });
});
