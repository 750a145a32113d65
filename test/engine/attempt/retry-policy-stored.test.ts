import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskFail } from '../../../src/engine/attempt/fail.js';
import { taskGet } from '../../../src/db/queries/tasks-read.js';
import { TASK_DEFAULTS } from '../../../src/dag/spec.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, rowsOf } from '../../helpers/factories.js';

const { db } = await testDatabase();
beforeEach(() => databaseReset(db));

const stored = async (dagId: string) => Object.fromEntries((await rowsOf<{ key: string; retry_policy: unknown }>(db, sql`
  select key, retry_policy from tasks where dag_id = ${dagId}`)).map((r) => [r.key, r.retry_policy]));

const secondsToRunAt = async (taskId: string) =>
  (await rowsOf<{ s: number }>(db, sql`select extract(epoch from run_at - now())::float8 as s from tasks where id = ${taskId}`))[0]!.s;

// The row is rewritten at every state change: a policy left at the defaults costs 5 bytes of it, not 164.
describe('a task row stores its retry policy as its difference from the defaults', () => {
  it('stores {} for the defaults and only the fields a DAG changed; every read gets the whole policy back', async () => {
    const dagId = await dagCreate(db, `name: stored
tasks:
  plain: { type: t }
  own: { type: t, retry: { strategy: fixed, initial_delay: 30s, jitter: 0, no_retry_on: [auth_failure] } }
`);
    expect(await stored(dagId)).toEqual({ plain: {}, own: { strategy: 'fixed', initialDelaySec: 30, jitter: 0, noRetryOn: ['auth_failure'] } });

    const agentId = await agentCreate(db, 'stored-a');
    const claimed = await taskClaim(db, agentId, { limit: 2 });
    const [plain, own] = ['plain', 'own'].map((k) => claimed.find((t) => t.key === k)!);
    expect((await taskGet(db, plain!.id))!.retryPolicy).toEqual(TASK_DEFAULTS.retry);
    expect((await taskGet(db, own!.id))!.retryPolicy).toEqual({ ...TASK_DEFAULTS.retry, strategy: 'fixed', initialDelaySec: 30, jitter: 0, noRetryOn: ['auth_failure'] });

    // The failure path reads the column raw (tasks-lifecycle.ts): the stored fields decide, the defaults fill in.
    expect(await taskFail(db, { taskId: own!.id, fence: own!.fence, errorClass: 'auth_failure', message: '401' }))
      .toMatchObject({ status: 'dead_lettered', reason: 'error class auth_failure is in no_retry_on' });
    const retried = await taskFail(db, { taskId: plain!.id, fence: plain!.fence, errorClass: 'crash', message: 'boom' });
    expect(retried.status).toBe('retrying');
    const s = await secondsToRunAt(plain!.id);
    // The default exponential policy's first delay: 10 s, ± 10 % jitter.
    expect(s).toBeGreaterThan(8.5);
    expect(s).toBeLessThan(11.5);
  });

  it('a row written whole, as versions before stored it, reads the same', async () => {
    const dagId = await dagCreate(db, 'name: whole\ntasks:\n  x: { type: t }\n');
    const policy = { ...TASK_DEFAULTS.retry, strategy: 'fixed', initialDelaySec: 20, jitter: 0 };
    await db.execute(sql`update tasks set retry_policy = ${JSON.stringify(policy)}::jsonb where dag_id = ${dagId}`);
    const [t] = await taskClaim(db, await agentCreate(db, 'whole-a'));
    expect((await taskGet(db, t!.id))!.retryPolicy).toEqual(policy);
    expect((await taskFail(db, { taskId: t!.id, fence: t!.fence, errorClass: 'crash', message: 'boom' })).status).toBe('retrying');
    const s = await secondsToRunAt(t!.id);
    expect(s).toBeGreaterThan(18.5);
    expect(s).toBeLessThan(20.5);
  });
});
