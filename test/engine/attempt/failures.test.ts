import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { dlqCancel, dlqList, dlqRetry, dlqShow } from '../../../src/engine/ops/dlq.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { taskStart } from '../../../src/engine/attempt/lease.js';
import { taskFail } from '../../../src/engine/attempt/fail.js';
import { streamWrite } from '../../../src/engine/attempt/streams.js';
import { dagGet } from '../../../src/db/queries/dags.js';
import { attemptListForTask } from '../../../src/db/queries/attempts.js';
import { reaperCreate } from '../../../src/maintenance/reaper.js';
import { promoterCreate } from '../../../src/maintenance/promoter.js';
import { LeaseLostError } from '../../../src/errors.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, leaseExpire, retryDue, rowsOf, taskStatusByKey } from '../../helpers/factories.js';

const { db } = await testDatabase();
const reaper = reaperCreate({ db });
const promoter = promoterCreate({ db });
beforeEach(() => databaseReset(db));

/** Seconds from now until the task's run_at, by the database clock. */
async function secondsUntilRunAt(taskId: string): Promise<number> {
  const { rows } = await db.execute<{ s: number }>(sql`select extract(epoch from run_at - now())::float8 as s from tasks where id = ${taskId}`);
  return rows[0]!.s;
}

const claimOne = async (agentId: string) => {
  const [t] = await taskClaim(db, agentId);
  if (!t) throw new Error(`${agentId} claimed nothing`);
  return t;
};

describe('zombie agents', () => {
  it('a reaped lease cannot be completed by its old holder; the new holder completes', async () => {
    const dagId = await dagCreate(db, 'name: zombie\ntasks:\n  job: { type: t, retry: { strategy: immediate } }\n  after: { type: t, depends_on: [job] }\n');
    const [a, b] = [await agentCreate(db, 'zombie-a'), await agentCreate(db, 'zombie-b')];
    const held = await claimOne(a);
    await taskStart(db, { taskId: held.id, fence: held.fence });
    await leaseExpire(db, held.id);
    expect(await reaper.runOnce()).toBe(1);
    expect((await taskStatusByKey(db, dagId)).job).toBe('ready');

    const retaken = await claimOne(b);
    expect(retaken.id).toBe(held.id);
    expect(retaken.fence).toBeGreaterThan(held.fence);
    await expect(taskComplete(db, { taskId: held.id, fence: held.fence, output: 'zombie' })).rejects.toBeInstanceOf(LeaseLostError);
    await taskComplete(db, { taskId: retaken.id, fence: retaken.fence, output: 'fresh' });

    const attempts = await attemptListForTask(db, held.id);
    expect(attempts.map((x) => [x.agentId, x.outcome, x.errorClass])).toEqual([[a, 'failed', 'crash'], [b, 'completed', null]]);
    const { rows } = await db.execute(sql`select output from tasks where id = ${held.id}`);
    expect(rows[0]).toEqual({ output: 'fresh' });
    expect((await taskStatusByKey(db, dagId)).after).toBe('ready');
  });

  it('the reaper leaves alone a task whose lease was renewed; a claim never started is handed back without spending an attempt, three times, then timed out', async () => {
    const dagId = await dagCreate(db, 'name: ttl\ntasks:\n  x: { type: t, max_attempts: 2, retry: { strategy: immediate } }\n');
    const agentId = await agentCreate(db, 'ttl-a');
    for (let lapse = 1; lapse <= 3; lapse++) {
      const t = await claimOne(agentId);
      expect(t.attempt).toBe(1);
      expect(await reaper.runOnce()).toBe(0);
      await leaseExpire(db, t.id);
      expect(await reaper.runOnce()).toBe(1);
      const [row] = await rowsOf<{ status: string; attempts: number; claim_lapses: number }>(db, sql`select status, attempts, claim_lapses from tasks where id = ${t.id}`);
      expect(row).toEqual({ status: 'ready', attempts: 0, claim_lapses: lapse });
    }
    // The bound is reached: the next lapse is an attempt (timeout), as any other.
    const t = await claimOne(agentId);
    await leaseExpire(db, t.id);
    expect(await reaper.runOnce()).toBe(1);
    const history = await attemptListForTask(db, t.id);
    expect(history.map((a) => [a.outcome, a.errorClass])).toEqual([['lapsed', null], ['lapsed', null], ['lapsed', null], ['failed', 'timeout']]);
    expect((await taskStatusByKey(db, dagId)).x).toBe('ready');
  });

  it('a claim straight into RUNNING (the runtime\'s) whose agent never showed a sign of life is a lapse too: its claim and its first beat are one instant', async () => {
    const tasks = Array.from({ length: 40 }, (_, i) => `  t${i}: { type: t }`).join('\n');
    await dagCreate(db, `name: started\ntasks:\n${tasks}\n`);
    const agentId = await agentCreate(db, 'start-a');
    const claimed = await taskClaim(db, agentId, { start: true, limit: 40 });
    expect(claimed).toHaveLength(40);
    const stamps = await rowsOf<{ same: boolean }>(db, sql`select heartbeat_at = claimed_at and started_at = claimed_at as same from tasks where claimed_by = ${agentId}`);
    expect(stamps.every((r) => r.same)).toBe(true);
    for (const t of claimed) await leaseExpire(db, t.id);
    expect(await reaper.runOnce()).toBe(40);
    const outcomes = await rowsOf<{ outcome: string; n: number }>(db, sql`select outcome, count(*)::int as n from attempts a join tasks t on t.id = a.task_id where t.claimed_by = ${agentId} group by outcome`);
    expect(outcomes).toEqual([{ outcome: 'lapsed', n: 40 }]);
  });

  it('a claim straight into RUNNING whose agent wrote to a stream before its first beat had its claim: a crash, charged as an attempt', async () => {
    await dagCreate(db, 'name: streamed\ntasks:\n  x: { type: t, retry: { strategy: immediate } }\n  y: { type: t, retry: { strategy: immediate } }\n');
    const [agentId, other] = [await agentCreate(db, 'stream-a'), await agentCreate(db, 'stream-b')];
    const [t] = await taskClaim(db, agentId, { start: true });
    const [quiet] = await taskClaim(db, other, { start: true });
    await streamWrite(db, { taskId: t!.id, fence: t!.fence }, { name: 'output', fromSeq: 1, chunks: [{ kind: 'text', data: 'working' }] });
    await leaseExpire(db, t!.id);
    await leaseExpire(db, quiet!.id);
    expect(await reaper.runOnce()).toBe(2);
    const outcome = async (id: string) => (await attemptListForTask(db, id)).map((a) => [a.outcome, a.errorClass]);
    expect(await outcome(t!.id)).toEqual([['failed', 'crash']]);
    // The task beside it wrote nothing: a lapse, as before.
    expect(await outcome(quiet!.id)).toEqual([['lapsed', null]]);
    // The retry is attempt 2, so its stream does not take attempt 1's number.
    const [again] = await taskClaim(db, agentId, { start: true });
    expect(again!.attempt).toBe(2);
  });

  it('a running task whose agent showed a sign of life (start or heartbeat) and then went quiet is a crash, charged as an attempt', async () => {
    await dagCreate(db, 'name: quiet\ntasks:\n  x: { type: t, retry: { strategy: immediate } }\n');
    const agentId = await agentCreate(db, 'quiet-a');
    const t = await claimOne(agentId);
    await taskStart(db, { taskId: t.id, fence: t.fence });
    await leaseExpire(db, t.id);
    expect(await reaper.runOnce()).toBe(1);
    const [attempt] = await attemptListForTask(db, t.id);
    expect(attempt).toMatchObject({ outcome: 'failed', errorClass: 'crash' });
  });
});

describe('retries', () => {
  it('backs off exponentially by the database clock, capped at max_delay', async () => {
    const dagId = await dagCreate(db, `name: backoff
tasks:
  x: { type: t, max_attempts: 6, retry: { strategy: exponential, initial_delay: 10s, multiplier: 3, max_delay: 60s, jitter: 0 } }
`);
    const agentId = await agentCreate(db, 'backoff-a');
    const expected = [10, 30, 60, 60];
    for (const delay of expected) {
      const t = await claimOne(agentId);
      const r = await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'provider_error', message: 'upstream 502' });
      expect(r.status).toBe('retrying');
      expect(await secondsUntilRunAt(t.id)).toBeCloseTo(delay, 0);
      expect(await promoter.runOnce()).toBe(0);
      await retryDue(db, t.id);
      expect(await promoter.runOnce()).toBe(1);
    }
    expect((await taskStatusByKey(db, dagId)).x).toBe('ready');
  });

  it('dead-letters at once on a no_retry_on class, and when attempts are exhausted', async () => {
    const dagId = await dagCreate(db, `name: limits
tasks:
  auth: { type: t, max_attempts: 5, retry: { no_retry_on: [auth_failure] } }
  flaky: { type: t, max_attempts: 2, retry: { strategy: immediate } }
`);
    const agentId = await agentCreate(db, 'limits-a');
    const claimed = await taskClaim(db, agentId, { limit: 2 });
    const auth = claimed.find((t) => t.key === 'auth')!;
    const r1 = await taskFail(db, { taskId: auth.id, fence: auth.fence, errorClass: 'auth_failure', message: '401' });
    expect(r1).toMatchObject({ status: 'dead_lettered', poisonPill: false, reason: 'error class auth_failure is in no_retry_on' });

    let flaky = claimed.find((t) => t.key === 'flaky')!;
    expect((await taskFail(db, { taskId: flaky.id, fence: flaky.fence, errorClass: 'crash', message: 'boom 1' })).status).toBe('ready');
    flaky = await claimOne(agentId);
    const r2 = await taskFail(db, { taskId: flaky.id, fence: flaky.fence, errorClass: 'crash', message: 'boom 2' });
    expect(r2).toMatchObject({ status: 'dead_lettered', reason: 'attempts exhausted (2/2)' });

    const dag = await dagGet(db, dagId);
    expect(dag?.status).toBe('blocked');
    expect(dag?.blockedReason).toMatch(/dead-lettered/);
  });

  it('a task failing on 2 distinct agents with 3 attempts is a poison pill, with its whole history', async () => {
    const dagId = await dagCreate(db, 'name: poison\ntasks:\n  p: { type: t, max_attempts: 10, retry: { strategy: immediate } }\n');
    const [a, b] = [await agentCreate(db, 'poison-a'), await agentCreate(db, 'poison-b')];
    const outcomes = [];
    for (const [agentId, cost] of [[a, 0.1], [a, 0.2], [b, 0.3]] as const) {
      const t = await claimOne(agentId);
      outcomes.push(await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'invalid_output', message: `bad output from ${agentId}`, costUsd: cost }));
    }
    expect(outcomes.map((o) => o.status)).toEqual(['ready', 'ready', 'dead_lettered']);
    const last = outcomes[2]!;
    if (last.status !== 'dead_lettered') throw new Error('unreachable');
    expect(last.poisonPill).toBe(true);
    const { entry } = await dlqShow(db, last.deadLetterId);
    expect(entry).toMatchObject({ poisonPill: true, attempts: 3, dagId });
    expect(entry.totalCostUsd).toBeCloseTo(0.6, 6);
    expect((entry.history as Array<{ agent: string; error: string }>).map((h) => h.agent)).toEqual([a, a, b]);
    expect((entry.history as Array<{ error_class: string }>).every((h) => h.error_class === 'invalid_output')).toBe(true);
  });
});

describe('dead letter queue resolution', () => {
  it('dlq retry puts the task back and the DAG flows on to completion', async () => {
    const dagId = await dagCreate(db, 'name: revive\ntasks:\n  x: { type: t, max_attempts: 1 }\n  y: { type: t, depends_on: [x] }\n');
    const agentId = await agentCreate(db, 'revive-a');
    const x = await claimOne(agentId);
    const failed = await taskFail(db, { taskId: x.id, fence: x.fence, errorClass: 'crash', message: 'died' });
    if (failed.status !== 'dead_lettered') throw new Error('expected a dead letter');
    expect((await dlqList(db, { dagId })).map((e) => e.id)).toEqual([failed.deadLetterId]);

    const resolved = await dlqRetry(db, failed.deadLetterId, { resetAttempts: true, by: 'tester', note: 'fixed the key' });
    expect(resolved).toMatchObject({ resolution: 'retried', resolvedBy: 'tester', resolvedNote: 'fixed the key' });
    expect((await dagGet(db, dagId))?.status).toBe('running');
    expect(await dlqList(db, { dagId })).toEqual([]);
    await expect(dlqRetry(db, failed.deadLetterId)).rejects.toThrow(/already resolved/);

    const again = await claimOne(agentId);
    expect(again.attempt).toBe(1);
    await taskComplete(db, { taskId: again.id, fence: again.fence, output: 'ok' });
    const y = await claimOne(agentId);
    await taskComplete(db, { taskId: y.id, fence: y.fence, output: 'ok' });
    expect((await dagGet(db, dagId))?.status).toBe('completed');
  });

  it('dlq cancel records the note, cancels what depended on the task, and settles the DAG', async () => {
    const dagId = await dagCreate(db, 'name: abandon\ntasks:\n  x: { type: t, max_attempts: 1 }\n  y: { type: t, depends_on: [x] }\n  z: { type: t }\n');
    const agentId = await agentCreate(db, 'abandon-a');
    const claimed = await taskClaim(db, agentId, { limit: 2 });
    const x = claimed.find((t) => t.key === 'x')!;
    const z = claimed.find((t) => t.key === 'z')!;
    await taskComplete(db, { taskId: z.id, fence: z.fence, output: 1 });
    const failed = await taskFail(db, { taskId: x.id, fence: x.fence, errorClass: 'crash', message: 'died' });
    if (failed.status !== 'dead_lettered') throw new Error('expected a dead letter');
    const r = await dlqCancel(db, failed.deadLetterId, { note: 'not worth it', by: 'tester' });
    expect(r).toMatchObject({ resolution: 'cancelled', resolvedNote: 'not worth it' });
    expect(await taskStatusByKey(db, dagId)).toEqual({ x: 'cancelled', y: 'cancelled', z: 'completed' });
    expect((await dagGet(db, dagId))?.status).toBe('completed');
  });
});
