import { describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { tokenCreate } from '../../src/auth/tokens.js';

// GET /api/costs: the spend report (dagent costs) and the usage ledger by model, over usage an agent reported through
// the agent protocol; who may read it, and a bad `days` refused naming the field.
const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const { call } = http;

const DAG = `name: spend-http
budget_usd: 5
tasks:
  run: { type: t, spec: { constraints: { capabilities: [paid], max_cost_usd: 1 } } }
  stop: { type: t, spec: { constraints: { capabilities: [paid], max_cost_usd: 0.1 } } }
`;

describe('GET /api/costs', () => {
  it('says what a DAG, an agent, a running attempt and each model spent, and which attempt a limit stopped', async () => {
    const agent = await http.agentToken('a1', ['paid'], [], ['model-a', 'model-b']);
    const registered = await call('POST', '/api/agents', { token: agent, body: { id: 'a1', type: 'worker', capabilities: ['paid'], models: ['model-a', 'model-b'], max_concurrent: 2, budget_usd: 10 } });
    expect(registered.status).toBe(201);
    const submitted = await call('POST', '/api/dags', { raw: DAG, contentType: 'application/yaml' });
    expect(submitted.status).toBe(201);
    const dagId: string = submitted.body.results[0].dagId;
    const claimed = await call('POST', '/api/agents/a1/claim', { token: agent, body: { limit: 2, start: true } });
    const byKey = new Map<string, { id: string; fence: number }>(claimed.body.tasks.map((t: { key: string; id: string; fence: number }) => [t.key, t]));
    const [run, stop] = [byKey.get('run')!, byKey.get('stop')!];
    const report = (t: { id: string; fence: number }, body: Record<string, unknown>) =>
      call('POST', `/api/tasks/${t.id}/usage`, { token: agent, body: { fence: t.fence, ...body } });
    expect((await report(run, { report_id: 'r1', cost_usd: 0.3, tokens_in: 1000, tokens_out: 200, model: 'model-a' })).body.stopped).toBeNull();
    expect((await report(run, { report_id: 'r2', cost_usd: 0.05, tokens_in: 10, model: 'model-b' })).body.stopped).toBeNull();
    // Past the task's max_cost_usd (0.1): charged, and the attempt is stopped.
    expect((await report(stop, { report_id: 's1', cost_usd: 0.2, tokens_in: 100, model: 'model-a' })).body.stopped)
      .toEqual({ limit: 'task.max_cost_usd', limitUsd: 0.1, spentUsd: 0.2 });

    const r = await call('GET', '/api/costs');
    expect(r.status).toBe(200);
    // The DAG (blocked: the stopped task was dead-lettered): 0.55 spent; run's claim still reserves 1 − 0.35; stop's
    // reservation went with its attempt.
    expect(r.body.dags).toEqual([{ id: dagId, name: 'spend-http', status: 'blocked', budgetUsd: 5, spentUsd: 0.55, reservedUsd: 0.65, remainingUsd: 3.8 }]);
    expect(r.body.agents).toEqual([{ id: 'a1', budgetUsd: 10, spentUsd: 0.55, reservedUsd: 0.65, remainingUsd: 8.8 }]);
    expect(r.body.running).toEqual([{ taskId: run.id, dagId, key: 'run', agentId: 'a1', fence: run.fence, spentUsd: 0.35, reservedUsd: 0.65, maxCostUsd: 1 }]);
    expect(r.body.stops).toEqual([{ at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/), taskId: stop.id, key: 'stop', dagId, agentId: 'a1', limit: 'task.max_cost_usd', limitUsd: 0.1, spentUsd: 0.2, limitTokens: null, spentTokens: null }]);
    // Only the stopped attempt has ended: today's spend is its 0.2.
    expect(r.body.days).toEqual([{ day: new Date().toISOString().slice(0, 10), costUsd: 0.2, attempts: 1 }]);
    expect(r.body.models).toEqual([
      { model: 'model-a', costUsd: 0.5, tokensIn: 1100, tokensOut: 200, reports: 2, unpricedReports: 0 },
      { model: 'model-b', costUsd: 0.05, tokensIn: 10, tokensOut: 0, reports: 1, unpricedReports: 0 },
    ]);

    // A report whose cost its reporter did not know (cost_usd null) is counted apart, never as $0.
    expect((await report(run, { report_id: 'u1', cost_usd: null, tokens_in: 40, model: 'model-a' })).status).toBe(200);
    expect((await report(run, { report_id: 'u2', cost_usd: null, tokens_in: 7, model: 'model-b' })).status).toBe(200);
    expect((await call('GET', '/api/costs')).body.models).toEqual([
      { model: 'model-a', costUsd: 0.5, tokensIn: 1140, tokensOut: 200, reports: 3, unpricedReports: 1 },
      { model: 'model-b', costUsd: 0.05, tokensIn: 17, tokensOut: 0, reports: 2, unpricedReports: 1 },
    ]);
  });

  it('takes days from 1 to 90 and refuses anything else (400 naming days); a reader may read, an agent or a signal token may not', async () => {
    for (const days of ['1', '90']) expect((await call('GET', `/api/costs?days=${days}`)).status, days).toBe(200);
    for (const days of ['0', '91', '-1', '1.5', 'abc', '']) {
      const r = await call('GET', `/api/costs?days=${encodeURIComponent(days)}`);
      expect(r.status, days).toBe(400);
      expect(r.body.error.code).toBe('INVALID_INPUT');
      expect(r.body.error.message).toContain('days');
    }
    const reader = (await tokenCreate(db, { role: 'read', name: 'reader' })).token;
    const read = await call('GET', '/api/costs?days=30', { token: reader });
    expect([read.status, Object.keys(read.body)]).toEqual([200, ['days', 'agents', 'dags', 'running', 'stops', 'models']]);
    const agent = await http.agentToken('a2', ['paid']);
    const signal = (await tokenCreate(db, { role: 'signal', name: 'ci' })).token;
    for (const [token, status] of [[agent, 403], [signal, 403], [null, 401]] as const) {
      const r = await call('GET', '/api/costs', { token });
      expect(r.status, String(token)).toBe(status);
    }
  });
});
