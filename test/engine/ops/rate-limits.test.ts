import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskFail } from '../../../src/engine/attempt/fail.js';
import { statsGet } from '../../../src/engine/read/inspect.js';
import { promoterCreate } from '../../../src/maintenance/promoter.js';
import { testDatabase } from '../../helpers/db.js';
import { testHttp } from '../../helpers/http.js';
import { agentCreate, dagCreate, databaseReset, retryDue, rowsOf } from '../../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
beforeEach(() => databaseReset(db));

/** An instant as every answer and `--json` sends it (Date.toISOString). */
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const taskRow = async (id: string) => (await rowsOf<{ status: string; attempts: number; run_at: Date }>(db, sql`select status, attempts, run_at from tasks where id = ${id}`))[0]!;
const pauseLeft = async (model: string) => (await rowsOf<{ left: number }>(db, sql`
  select extract(epoch from until - now())::float8 as left from model_pauses where model = ${model}`))[0]?.left;
const rateLimitedCount = (metrics: string) => Number(metrics.split('\n')
  .find((l) => l.startsWith('dagent_task_failures_total{type="w",error_class="rate_limit",outcome="rate_limited"}'))?.split(' ')[1] ?? 0);
const ready = async (id: string) => { await retryDue(db, id); await promoterCreate({ db }).runOnce(); };

describe('a provider\'s rate limit', () => {
  it('gives the attempt back, returns the task after the Retry-After, and pauses the model for the fleet while other models keep flowing', async () => {
    await dagCreate(db, `
name: fleet
tasks:
  a: { type: w, spec: { models: [m-fast, m-slow] } }
  b: { type: w, spec: { models: [m-fast] } }
  c: { type: w, spec: { models: [m-slow] } }
  d: { type: w }
`);
    await agentCreate(db, 'w1', [], undefined, { models: ['m-fast', 'm-slow'] });
    await agentCreate(db, 'gateway', [], undefined, { models: ['*'] });
    const [a] = (await taskClaim(db, 'w1', { limit: 4 })).filter((t) => t.key === 'a');
    expect(a!.model).toBe('m-fast');
    await db.execute(sql`update tasks set status = 'ready', claimed_by = null where status = 'claimed' and key <> 'a'`);

    const outcome = await taskFail(db, { taskId: a!.id, fence: a!.fence, errorClass: 'rate_limit', message: '429 Too Many Requests', retryAfterSec: 30, model: 'm-fast' });
    expect(outcome).toMatchObject({ status: 'retrying', rateLimited: true });
    expect(await taskRow(a!.id)).toMatchObject({ status: 'retrying', attempts: 0 });
    const [attempt] = await rowsOf<{ outcome: string; error_class: string; details: { retry_after_sec: number } }>(db, sql`select outcome, error_class, details from attempts where task_id = ${a!.id}`);
    expect([attempt!.outcome, attempt!.error_class, attempt!.details.retry_after_sec]).toEqual(['rate_limited', 'rate_limit', 30]);
    expect(await pauseLeft('m-fast')).toBeGreaterThan(25);
    expect((await statsGet(db)).pausedModels.map((p) => p.model)).toEqual(['m-fast']);

    // While m-fast is paused: nobody gets b (m-fast only), the gateway gets c and d.
    expect((await taskClaim(db, 'gateway', { limit: 10 })).map((t) => t.key).sort()).toEqual(['c', 'd']);
    // a, due again, runs on the model that is not paused.
    await ready(a!.id);
    const [again] = await taskClaim(db, 'w1');
    expect([again!.key, again!.model, again!.attempt]).toEqual(['a', 'm-slow', 1]);
    expect(await taskClaim(db, 'w1')).toEqual([]);
    // Lifted: b is handed out, on m-fast.
    await db.execute(sql`update model_pauses set until = now() - interval '1 second'`);
    const [b] = await taskClaim(db, 'w1');
    expect([b!.key, b!.model]).toEqual(['b', 'm-fast']);
  });

  it('counts as an attempt after ten in a row; the same report sent again is answered the same and recorded once', async () => {
    await dagCreate(db, 'name: limited\ntasks:\n  t: { type: w, max_attempts: 2, spec: { models: [m] } }\n');
    await agentCreate(db, 'w', [], undefined, { models: ['m'] });
    let last;
    for (let i = 0; i < 10; i++) {
      const [t] = await taskClaim(db, 'w');
      expect(t!.attempt).toBe(1);
      const report = { taskId: t!.id, fence: t!.fence, errorClass: 'rate_limit', message: 'slow down', model: 'm' };
      last = await taskFail(db, report);
      expect(last).toMatchObject({ rateLimited: true });
      if (i === 0) {
        // Without a Retry-After: 5 s, doubling with each one in a row. A replay is answered the same.
        expect(await taskFail(db, report)).toMatchObject({ status: 'retrying', rateLimited: true });
        expect((await rowsOf(db, sql`select 1 from attempts where task_id = ${t!.id}`)).length).toBe(1);
      }
      await db.execute(sql`update model_pauses set until = now() - interval '1 second'`);
      await ready(t!.id);
    }
    const [attempts] = await rowsOf<{ delays: number[] }>(db, sql`select array_agg((details->>'retry_after_sec')::int order by fence) as delays from attempts`);
    expect(attempts!.delays).toEqual([5, 10, 20, 40, 80, 160, 320, 600, 600, 600]);
    const [eleventh] = await taskClaim(db, 'w');
    const spent = await taskFail(db, { taskId: eleventh!.id, fence: eleventh!.fence, errorClass: 'rate_limit', message: 'slow down', model: 'm' });
    expect(spent).not.toHaveProperty('rateLimited');
    expect((await taskRow(eleventh!.id)).attempts).toBe(1);
  });

  it('an agent pauses only a model the task accepts, for at most ten minutes, over HTTP too; /metrics shows the pause', async () => {
    await dagCreate(db, 'name: hostile\ntasks:\n  t: { type: w, spec: { models: [m-a] } }\n  u: { type: w, spec: { models: [m-a] } }\n');
    await agentCreate(db, 'w', [], undefined, { models: ['*'] });
    const token = await http.agentToken('w');
    const [t, u] = await taskClaim(db, 'w', { limit: 2 });
    const rateLimitedBefore = rateLimitedCount((await http.call('GET', '/metrics')).body as string);
    // A model the attempt could not use (the task accepts m-a only) is refused, and nothing changes.
    const other = await http.call('POST', `/api/tasks/${t!.id}/fail`, { token, body: { fence: t!.fence, error_class: 'rate_limit', message: '429', retry_after_sec: 86_400, model: 'm-other' } });
    expect([other.status, other.body.error.code]).toEqual([400, 'INVALID_INPUT']);
    expect(other.body.error.message).toMatch(/body\.model: m-other is not a model this attempt could use/);
    expect(await pauseLeft('m-other')).toBeUndefined();
    expect((await taskRow(t!.id)).status).toBe('claimed');
    const day = await http.call('POST', `/api/tasks/${u!.id}/fail`, { token, body: { fence: u!.fence, error_class: 'rate_limit', message: '429', retry_after_sec: 86_400, model: 'm-a' } });
    expect(day.status).toBe(200);
    const left = (await pauseLeft('m-a'))!;
    expect(left).toBeGreaterThan(590);
    expect(left).toBeLessThanOrEqual(600);
    // The pause as the fleet's stats and the rate limits' list show it: `until` ISO 8601, like every instant.
    const paused = { model: 'm-a', until: expect.stringMatching(ISO), remainingSec: expect.any(Number), hits: 1 };
    expect((await http.call('GET', '/api/stats')).body.pausedModels).toEqual([expect.objectContaining(paused)]);
    expect((await http.call('GET', '/api/rate-limits')).body.paused).toEqual([expect.objectContaining(paused)]);
    const metrics = await http.call('GET', '/metrics');
    const line = (metrics.body as string).split('\n').find((l) => l.startsWith('dagent_model_paused_seconds{model="m-a"}'));
    expect(Number(line!.split(' ')[1])).toBeGreaterThan(590);
    // Counters are this process's (the tests before counted theirs): the one report taken added one.
    expect(rateLimitedCount(metrics.body as string) - rateLimitedBefore).toBe(1);
  });
});
