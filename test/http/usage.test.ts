import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { agentCreate, dagCreate, databaseReset, leaseExpire, rowsOf } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';

// POST /api/tasks/:id/usage: an HTTP agent's usage, charged when reported and held to the attempt's limits, with
// what a hostile or stale agent sends refused.
const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const { call } = http;
const readerToken = (await tokenCreate(db, { role: 'read', name: 'reader' })).token;
beforeEach(() => databaseReset(db));

const ledger = async () => (await rowsOf<{ n: number; usd: number | null }>(db, sql`select count(*)::int as n, sum(cost_usd)::float8 as usd from usage_reports`))[0]!;

async function held(maxCost = 0.1) {
  await agentCreate(db, 'a1', ['paid']);
  await dagCreate(db, `name: u\ntasks:\n  t: { type: t, spec: { constraints: { capabilities: [paid], max_cost_usd: ${maxCost} } } }\n`);
  const [t] = await taskClaim(db, 'a1', { start: true });
  return { t: t!, token: await http.agentToken('a1', ['paid']) };
}

describe('POST /api/tasks/:id/usage', () => {
  it('charges each report once, says what is left, and stops the attempt past max_cost_usd', async () => {
    const { t, token } = await held(0.1);
    const url = `/api/tasks/${t.id}/usage`;
    const first = await call('POST', url, { token, body: { fence: t.fence, report_id: 'r1', cost_usd: 0.06, tokens_in: 500, cached_read_tokens: 400 } });
    expect([first.status, first.body]).toEqual([200, { applied: true, attempt: { costUsd: 0.06, tokensIn: 500, tokensOut: 0 }, remainingUsd: 0.04, remainingTokens: null, low: null, stopped: null }]);
    const again = await call('POST', url, { token, body: { fence: t.fence, report_id: 'r1', cost_usd: 0.06 } });
    expect([again.status, again.body.applied, again.body.attempt.costUsd]).toEqual([200, false, 0.06]);
    const budget = await call('GET', `/api/tasks/${t.id}/budget?fence=${t.fence}`, { token });
    expect([budget.status, budget.body]).toEqual([200, { attempt: { costUsd: 0.06, tokensIn: 500, tokensOut: 0 }, remainingUsd: 0.04, remainingTokens: null, low: null }]);
    expect((await call('GET', `/api/tasks/${t.id}/budget?fence=${t.fence + 1}`, { token })).status).toBe(409);
    const nearly = await call('POST', url, { token, body: { fence: t.fence, report_id: 'r1b', cost_usd: 0.03 } });
    expect(nearly.body.low).toEqual({ limit: 'task.max_cost_usd', limitUsd: 0.1, spentUsd: 0.09 });
    const over = await call('POST', url, { token, body: { fence: t.fence, report_id: 'r2', cost_usd: 0.05 } });
    expect([over.status, over.body.stopped]).toEqual([200, { limit: 'task.max_cost_usd', limitUsd: 0.1, spentUsd: 0.14 }]);
    expect(await ledger()).toEqual({ n: 3, usd: 0.14 });
    const [task] = await rowsOf<{ status: string }>(db, sql`select status from tasks where id = ${t.id}`);
    expect(task!.status).toBe('dead_lettered');
    const after = await call('POST', url, { token, body: { fence: t.fence, report_id: 'r3', cost_usd: 0.01 } });
    expect([after.status, after.body.error.code]).toEqual([409, 'BUDGET_EXCEEDED']);
  });

  it('refuses bad fields (400 naming them), others\' tasks (403), readers (403) and stale fences (409), and charges nothing', async () => {
    const { t, token } = await held(1);
    const url = `/api/tasks/${t.id}/usage`;
    for (const [body, field] of [
      [{ cost_usd: -1 }, 'cost_usd'], [{ cost_usd: 'a lot' }, 'cost_usd'], [{ cost_usd: 1e9 }, 'cost_usd'], [{ tokens_in: 1.5 }, 'tokens_in'],
      [{ tokens_out: -2 }, 'tokens_out'], [{ report_id: '' }, 'report_id'], [{ report_id: 'a\nb' }, 'report_id'], [{ extra: 1 }, ''],
    ] as const) {
      const r = await call('POST', url, { token, body: { fence: t.fence, report_id: 'k', ...body } });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.code).toBe('INVALID_INPUT');
      if (field) expect(r.body.error.message).toContain(field);
    }
    const other = await http.agentToken('a2', ['paid']);
    await agentCreate(db, 'a2', ['paid']);
    expect((await call('POST', url, { token: other, body: { fence: t.fence, report_id: 'k', cost_usd: 1 } })).status).toBe(403);
    expect((await call('POST', url, { token: readerToken, body: { fence: t.fence, report_id: 'k', cost_usd: 1 } })).status).toBe(403);
    expect((await call('POST', url, { token, body: { fence: t.fence + 1, report_id: 'k', cost_usd: 1 } })).status).toBe(409);
    expect(await ledger()).toEqual({ n: 0, usd: null });
    // A lapsed lease not yet taken back still charges what its holder spent.
    await leaseExpire(db, t.id);
    const lapsed = await call('POST', url, { token, body: { fence: t.fence, report_id: 'k', cost_usd: 0.2 } });
    expect([lapsed.status, lapsed.body.applied]).toEqual([200, true]);
  });

  it('holds the agent to its token\'s grant (a ceiling on what the token lets it spend), and keeps a null cost as unknown', async () => {
    // An agent row with no budget of its own (registered in-process), acting through a token whose grant allows 0.5 USD.
    await agentCreate(db, 'a1', ['paid']);
    await dagCreate(db, 'name: g\ntasks:\n  t: { type: t, spec: { constraints: { capabilities: [paid] } } }\n');
    const token = (await tokenCreate(db, { role: 'agent', agentId: 'a1', capabilities: ['paid'], budgetUsd: 0.5 })).token;
    const [claimed] = (await call('POST', '/api/agents/a1/claim', { token, body: { start: true } })).body.tasks;
    const url = `/api/tasks/${claimed.id}/usage`;
    const unknown = await call('POST', url, { token, body: { fence: claimed.fence, report_id: 'u', cost_usd: null, tokens_in: 300 } });
    expect([unknown.status, unknown.body.attempt, unknown.body.remainingUsd], JSON.stringify(unknown.body)).toEqual([200, { costUsd: 0, tokensIn: 300, tokensOut: 0 }, 0.5]);
    expect(await rowsOf(db, sql`select cost_usd, tokens_in::int from usage_reports`)).toEqual([{ cost_usd: null, tokens_in: 300 }]);
    const budget = await call('GET', `/api/tasks/${claimed.id}/budget?fence=${claimed.fence}`, { token });
    expect(budget.body.remainingUsd).toBe(0.5);
    const over = await call('POST', url, { token, body: { fence: claimed.fence, report_id: 'p', cost_usd: 0.6 } });
    expect([over.status, over.body.stopped]).toEqual([200, { limit: 'token.grant_budget_usd', limitUsd: 0.5, spentUsd: 0.6 }]);
    expect((await call('POST', url, { token, body: { fence: claimed.fence, report_id: 'q', cost_usd: 0.1 } })).body.error.code).toBe('BUDGET_EXCEEDED');
  });

  it('a report sent after the reaper took the task back is charged to the ended attempt and answered 409, saying so', async () => {
    const { t, token } = await held(1);
    await leaseExpire(db, t.id);
    expect(await reaperCreate({ db }).runOnce()).toBe(1);
    const url = `/api/tasks/${t.id}/usage`;
    const late = await call('POST', url, { token, body: { fence: t.fence, report_id: 'late', cost_usd: 0.3, tokens_out: 9 } });
    expect([late.status, late.body.error.lateCharged]).toEqual([409, { applied: true, attempt: { costUsd: 0.3, tokensIn: 0, tokensOut: 9 } }]);
    expect(late.body.error.message).toContain('charged to the attempt that ended');
    expect(await ledger()).toEqual({ n: 1, usd: 0.3 });
    // Another agent's token cannot charge it.
    await agentCreate(db, 'a2', ['paid']);
    const other = await call('POST', url, { token: await http.agentToken('a2', ['paid']), body: { fence: t.fence, report_id: 'x', cost_usd: 1 } });
    expect([other.status >= 400, other.body.error.lateCharged]).toEqual([true, undefined]);
    expect(await ledger()).toEqual({ n: 1, usd: 0.3 });
  });
});
