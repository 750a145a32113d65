import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { agentCreate, dagCreate, databaseReset, leaseExpire, rowsOf } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const { call } = http;
const reaper = reaperCreate({ db });
const readerToken = (await tokenCreate(db, { role: 'read', name: 'reader' })).token;
beforeEach(() => databaseReset(db));

const stepCount = async () => (await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from task_steps`))[0]!.n;

/** A task claimed (running) by agent `a1`, and a token acting as it. */
async function held() {
  await agentCreate(db, 'a1', ['steps']);
  await dagCreate(db, 'name: s\ndefaults: { max_attempts: 3, retry: { strategy: immediate } }\ntasks:\n  t: { type: t, spec: { constraints: { capabilities: [steps] } } }\n');
  const [t] = await taskClaim(db, 'a1', { start: true });
  return { t: t!, token: await http.agentToken('a1', ['steps']) };
}

describe('durable steps over HTTP', () => {
  it('the holder records a step (201), the same write again answers the recorded one (200); readers list and read it; 404 for a name not recorded', async () => {
    const { t, token } = await held();
    const put = await call('PUT', `/api/tasks/${t.id}/steps/call%201`, { token, body: { fence: t.fence, result: { text: 'hi' }, duration_ms: 40, cost_usd: 0.2, tokens_in: 5 } });
    expect(put.status).toBe(201);
    expect(put.body).toEqual({ recorded: true, step: {
      name: 'call 1', scope: 'task', attempt: 1, fence: t.fence, recordedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/), startedAt: null, sizeBytes: 13, durationMs: 40, costUsd: 0.2,
      tokensIn: 5, tokensOut: 0, model: null, result: { text: 'hi' },
    } });
    const again = await call('PUT', `/api/tasks/${t.id}/steps/call%201`, { token, body: { fence: t.fence, result: 'other' } });
    expect([again.status, again.body.recorded, again.body.step.result]).toEqual([200, false, { text: 'hi' }]);
    await call('PUT', `/api/tasks/${t.id}/steps/scratch`, { token, body: { fence: t.fence, result: null, scope: 'attempt' } });

    const list = await call('GET', `/api/tasks/${t.id}/steps`, { token: readerToken });
    expect(list.status).toBe(200);
    expect(list.body.steps.map((s: { name: string; scope: string; costUsd: number }) => [s.name, s.scope, s.costUsd])).toEqual([['call 1', 'task', 0.2], ['scratch', 'attempt', 0]]);
    expect(list.body.steps[0]).not.toHaveProperty('result');
    const one = await call('GET', `/api/tasks/${t.id}/steps/call%201`, { token: readerToken });
    expect([one.status, one.body.step.result]).toEqual([200, { text: 'hi' }]);
    const missing = await call('GET', `/api/tasks/${t.id}/steps/call%202`, { token: readerToken });
    expect([missing.status, missing.body.error.code]).toEqual([404, 'NOT_FOUND']);
    expect((await call('GET', '/api/tasks/no-such-task/steps', { token: readerToken })).status).toBe(404);
    expect(await stepCount()).toBe(2);
  });

  it('the holder\'s lookup of a step an earlier attempt recorded is a replay: recorded once with its cost, listed; a reader\'s read and the recorder\'s own lookup are not', async () => {
    const { t, token } = await held();
    await call('PUT', `/api/tasks/${t.id}/steps/paid`, { token, body: { fence: t.fence, result: 'answer', cost_usd: 0.3 } });
    expect((await call('GET', `/api/tasks/${t.id}/steps/paid?fence=${t.fence}`, { token })).status).toBe(200);
    expect((await call('GET', `/api/tasks/${t.id}/steps/paid`, { token: readerToken })).status).toBe(200);
    await leaseExpire(db, t.id);
    expect(await reaper.runOnce()).toBe(1);
    const [again] = await taskClaim(db, 'a1', { start: true });
    // Twice, as after a lost reply: one replay.
    for (let i = 0; i < 2; i++) {
      const got = await call('GET', `/api/tasks/${t.id}/steps/paid?fence=${again!.fence}`, { token });
      expect([got.status, got.body.step.result, got.body.step.fence]).toEqual([200, 'answer', t.fence]);
    }
    const missing = await call('GET', `/api/tasks/${t.id}/steps/other?fence=${again!.fence}`, { token });
    expect(missing.status).toBe(404);
    const list = await call('GET', `/api/tasks/${t.id}/steps`, { token: readerToken });
    expect(list.body.replays).toEqual([{ name: 'paid', attempt: again!.attempt, fence: again!.fence, recordedFence: t.fence, costUsd: 0.3, replayedAt: expect.stringMatching(/Z$/) }]);
  });

  it('a stale fence is 409 and writes nothing: the lease lapsed, or the task was reaped and claimed again', async () => {
    const { t, token } = await held();
    await leaseExpire(db, t.id);
    const lapsed = await call('PUT', `/api/tasks/${t.id}/steps/s`, { token, body: { fence: t.fence, result: 1 } });
    expect([lapsed.status, lapsed.body.error.code]).toEqual([409, 'LEASE_LOST']);
    expect(await reaper.runOnce()).toBe(1);
    const [again] = await taskClaim(db, 'a1', { start: true });
    const stale = await call('PUT', `/api/tasks/${t.id}/steps/s`, { token, body: { fence: t.fence, result: 1 } });
    expect([stale.status, stale.body.error.code]).toEqual([409, 'LEASE_LOST']);
    expect(await stepCount()).toBe(0);
    expect((await call('PUT', `/api/tasks/${t.id}/steps/s`, { token, body: { fence: again!.fence, result: 1 } })).status).toBe(201);
  });

  it('an agent token writes and reads only a task its agent holds; a reader reads and cannot write', async () => {
    const { t, token } = await held();
    await agentCreate(db, 'a2', ['steps']);
    const other = await http.agentToken('a2', ['steps']);
    const write = await call('PUT', `/api/tasks/${t.id}/steps/s`, { token: other, body: { fence: t.fence, result: 1 } });
    expect([write.status, write.body.error.code]).toEqual([403, 'FORBIDDEN']);
    expect((await call('GET', `/api/tasks/${t.id}/steps?fence=${t.fence}`, { token: other })).status).toBe(403);
    expect((await call('PUT', `/api/tasks/${t.id}/steps/s`, { token: readerToken, body: { fence: t.fence, result: 1 } })).status).toBe(403);
    expect((await call('PUT', `/api/tasks/no-such-task/steps/s`, { token, body: { fence: 1, result: 1 } })).status).toBe(404);
    expect(await stepCount()).toBe(0);
    // The holder reads under the fence of its hold (to replay a step before running it again).
    const noFence = await call('GET', `/api/tasks/${t.id}/steps`, { token });
    expect([noFence.status, noFence.body.error.message]).toEqual([400, expect.stringMatching(/^query\.fence/)]);
    expect((await call('GET', `/api/tasks/${t.id}/steps?fence=${t.fence}`, { token })).body).toEqual({ steps: [], replays: [] });
  });

  it('every bad field is a 400 naming it, and nothing is written', async () => {
    const { t, token } = await held();
    const put = (name: string, body: unknown) => call('PUT', `/api/tasks/${t.id}/steps/${name}`, { token, body });
    const cases: Array<[string, unknown, RegExp]> = [
      ['s', { result: 1 }, /body\.fence/],
      ['s', { fence: 'one', result: 1 }, /body\.fence/],
      ['s', { fence: t.fence }, /body\.result/],
      ['s', { fence: t.fence, result: 1, scope: 'dag' }, /body\.scope/],
      ['s', { fence: t.fence, result: 1, duration_ms: -1 }, /body\.duration_ms/],
      ['s', { fence: t.fence, result: 1, cost_usd: -1 }, /body\.cost_usd/],
      ['s', { fence: t.fence, result: 1, extra: true }, /extra/],
      ['a%0Ab', { fence: t.fence, result: 1 }, /params\.name must not contain control characters/],
      ['x'.repeat(201), { fence: t.fence, result: 1 }, /params\.name must be 1-200 characters/],
    ];
    for (const [name, body, field] of cases) {
      const r = await put(name, body);
      expect([r.status, r.body.error.code], JSON.stringify(body)).toEqual([400, 'INVALID_INPUT']);
      expect(r.body.error.message).toMatch(field);
    }
    const nul = await call('PUT', `/api/tasks/${t.id}/steps/s`, { token, raw: `{"fence":${t.fence},"result":"a\\u0000b"}` });
    expect([nul.status, nul.body.error.message]).toEqual([400, expect.stringMatching(/result.*NUL/)]);
    expect((await call('GET', `/api/tasks/${t.id}/steps/a%0Ab`, { token: readerToken })).status).toBe(400);
    expect(await stepCount()).toBe(0);
    // The longest name, in 4-byte characters, percent-encoded: the router reads it whole.
    const longest = '😀'.repeat(100);
    expect(longest.length).toBe(200);
    expect((await put(encodeURIComponent(longest), { fence: t.fence, result: 1 })).status).toBe(201);
    expect((await call('GET', `/api/tasks/${t.id}/steps/${encodeURIComponent(longest)}`, { token: readerToken })).body.step.name).toBe(longest);
  });
});
