import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, leaseExpire, rowsOf } from '../helpers/factories.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { prune } from '../../src/engine/ops/retention.js';
import { stepRecord, stepReplay, stepsList } from '../../src/engine/attempt/steps.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { attemptListForTask } from '../../src/db/queries/attempts.js';
import { LIMITS } from '../../src/config/limits.js';

const database = await testDatabase();
const { db } = database;
const { run } = agentRunners(database);
const reaper = reaperCreate({ db });
beforeEach(() => databaseReset(db));

const RETRYING = (cap: string) => `name: steps\ndefaults: { max_attempts: 3, retry: { strategy: immediate } }\ntasks:\n  t: { type: t, spec: { constraints: { capabilities: [${cap}] } } }\n`;
const stepRows = () => rowsOf<{ name: string; scope: string; attempt: number; fence: number; result: unknown; cost_usd: number }>(db, sql`
  select name, scope, attempt, fence, result, cost_usd::float8 as cost_usd from task_steps order by recorded_at, fence, name`);

async function claimed(cap = 'steps') {
  await agentCreate(db, 'a1', [cap]);
  await dagCreate(db, RETRYING(cap));
  const [t] = await taskClaim(db, 'a1', { start: true });
  return t!;
}

describe('durable steps in the engine', () => {
  it('records a result under the holder\'s fence and finds it by name; the same write again (a lost reply) returns the row, and one row stays', async () => {
    const t = await claimed();
    const first = await stepRecord(db, { taskId: t.id, fence: t.fence, name: 'call 1', result: { answer: 42 }, durationMs: 12, costUsd: 0.25, tokensIn: 10, tokensOut: 3, model: 'm' });
    expect(first.recorded).toBe(true);
    expect(first.step).toMatchObject({ name: 'call 1', scope: 'task', attempt: 1, fence: t.fence, result: { answer: 42 }, sizeBytes: 13, durationMs: 12, costUsd: 0.25, tokensIn: 10, model: 'm' });
    const again = await stepRecord(db, { taskId: t.id, fence: t.fence, name: 'call 1', result: { answer: 'different' } });
    expect([again.recorded, again.step.result]).toEqual([false, { answer: 42 }]);
    expect((await stepReplay(db, { taskId: t.id, fence: t.fence }, 'call 1'))?.result).toEqual({ answer: 42 });
    expect(await stepReplay(db, { taskId: t.id, fence: t.fence }, 'call 2')).toBeUndefined();
    // The holder's own step, looked up again, is not a replay.
    expect(await rowsOf(db, sql`select * from task_step_replays`)).toEqual([]);
    expect((await stepsList(db, t.id)).map((s) => s.name)).toEqual(['call 1']);
  });

  it('a write from a stale attempt is LEASE_LOST and records nothing: the lease lapsed, the task reaped and claimed again, or failed', async () => {
    const t = await claimed();
    await leaseExpire(db, t.id);
    // Lapsed but not yet reaped: fence and state still match, the lease does not.
    await expect(stepRecord(db, { taskId: t.id, fence: t.fence, name: 'late', result: 1 })).rejects.toMatchObject({ code: 'LEASE_LOST', message: /lease lapsed/ });
    expect(await reaper.runOnce()).toBe(1);
    const [again] = await taskClaim(db, 'a1', { start: true });
    expect(again!.fence).toBeGreaterThan(t.fence);
    await expect(stepRecord(db, { taskId: t.id, fence: t.fence, name: 'late', result: 1 })).rejects.toMatchObject({ code: 'LEASE_LOST' });
    expect(await stepRows()).toEqual([]);
    // The new holder writes; then it fails, and its fence is stale too.
    await stepRecord(db, { taskId: t.id, fence: again!.fence, name: 'late', result: 2 });
    await taskFail(db, { taskId: t.id, fence: again!.fence, errorClass: 'boom', message: 'x' });
    await expect(stepRecord(db, { taskId: t.id, fence: again!.fence, name: 'after', result: 3 })).rejects.toMatchObject({ code: 'LEASE_LOST' });
    expect((await stepRows()).map((r) => [r.name, r.fence, r.result])).toEqual([['late', again!.fence, 2]]);
    await expect(stepRecord(db, { taskId: 'no-such-task', fence: 1, name: 'x', result: 1 })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('a holder\'s lookup (stepReplay) answers the task-scoped step, and is LEASE_LOST for a fence that lost the task, as a write is', async () => {
    const t = await claimed();
    const ref = { taskId: t.id, fence: t.fence };
    await stepRecord(db, { ...ref, name: 'kept', result: { answer: 1 } });
    await stepRecord(db, { ...ref, name: 'mine only', result: 2, scope: 'attempt' });
    expect((await stepReplay(db, ref, 'kept'))?.result).toEqual({ answer: 1 });
    // An attempt-scoped step is never replayed, not even to its own attempt.
    expect(await stepReplay(db, ref, 'mine only')).toBeUndefined();
    expect(await stepReplay(db, ref, 'missing')).toBeUndefined();
    await expect(stepReplay(db, ref, 'bad\u0000name')).rejects.toMatchObject({ code: 'INVALID_INPUT', message: /control characters/ });
    await leaseExpire(db, t.id);
    await expect(stepReplay(db, ref, 'kept')).rejects.toMatchObject({ code: 'LEASE_LOST', message: /lease lapsed/ });
    expect(await reaper.runOnce()).toBe(1);
    const [again] = await taskClaim(db, 'a1', { start: true });
    await expect(stepReplay(db, ref, 'kept')).rejects.toMatchObject({ code: 'LEASE_LOST' });
    expect((await stepReplay(db, { taskId: t.id, fence: again!.fence }, 'kept'))?.result).toEqual({ answer: 1 });
    await expect(stepReplay(db, { taskId: 'no-such-task', fence: 1 }, 'kept')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('first write wins: a name an earlier attempt recorded is returned to the next one unchanged', async () => {
    const t = await claimed();
    await stepRecord(db, { taskId: t.id, fence: t.fence, name: 's', result: 'first' });
    await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'boom', message: 'x' });
    const [next] = await taskClaim(db, 'a1', { start: true });
    const r = await stepRecord(db, { taskId: t.id, fence: next!.fence, name: 's', result: 'second' });
    expect([r.recorded, r.step.result, r.step.fence]).toEqual([false, 'first', t.fence]);
    expect((await stepRows()).map((x) => x.result)).toEqual(['first']);
  });

  it('refuses bad names, results over stepResultBytes and steps past stepsPerTask, naming the limit, and records nothing', async () => {
    const t = await claimed();
    const ref = { taskId: t.id, fence: t.fence };
    await expect(stepRecord(db, { ...ref, name: '', result: 1 })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: /name must be 1-200 characters/ });
    await expect(stepRecord(db, { ...ref, name: 'x'.repeat(201), result: 1 })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(stepRecord(db, { ...ref, name: 'a\nb', result: 1 })).rejects.toMatchObject({ message: /control characters/ });
    await expect(stepRecord(db, { ...ref, name: 'big', result: 'x'.repeat(LIMITS.stepResultBytes) })).rejects
      .toMatchObject({ code: 'INVALID_INPUT', message: /step "big": result is 1048578 bytes as JSON; at most 1048576 \(stepResultBytes, DAGENT_LIMIT_STEP_RESULT_BYTES\)/ });
    expect(await stepRows()).toEqual([]);
    await db.execute(sql`insert into task_steps (task_id, dag_id, name, scope, attempt, fence, result, size_bytes)
      select ${t.id}, ${t.dagId}, 'filler ' || i, 'task', 1, ${t.fence}, 'null', 4 from generate_series(1, ${LIMITS.stepsPerTask}) i`);
    await expect(stepRecord(db, { ...ref, name: 'one more', result: 1 })).rejects
      .toMatchObject({ code: 'INVALID_INPUT', message: /recorded 1000 steps, the most it may \(stepsPerTask, DAGENT_LIMIT_STEPS_PER_TASK\)/ });
    // A name already recorded is still answered at the cap: nothing new is written.
    expect((await stepRecord(db, { ...ref, name: 'filler 7', result: 1 })).recorded).toBe(false);
    expect((await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from task_steps`))[0]!.n).toBe(LIMITS.stepsPerTask);
  });

  it('refuses a step that would take the task\'s steps past stepBytesPerTask, naming the limit, and records nothing', async () => {
    const t = await claimed();
    const ref = { taskId: t.id, fence: t.fence };
    // Rows that say they hold all but 10 bytes of the cap (their size as recorded is what counts).
    await db.execute(sql`insert into task_steps (task_id, dag_id, name, scope, attempt, fence, result, size_bytes)
      values (${t.id}, ${t.dagId}, 'heavy', 'task', 1, ${t.fence}, 'null', ${LIMITS.stepBytesPerTask - 10})`);
    await expect(stepRecord(db, { ...ref, name: 'over', result: 'x'.repeat(9) })).rejects.toMatchObject({
      code: 'INVALID_INPUT', message: new RegExp(`hold ${LIMITS.stepBytesPerTask - 10} bytes, and 11 more would pass ${LIMITS.stepBytesPerTask} \\(stepBytesPerTask, DAGENT_LIMIT_STEP_BYTES_PER_TASK\\)`),
    });
    expect((await stepRecord(db, { ...ref, name: 'fits', result: 'x'.repeat(8) })).recorded).toBe(true);
    expect((await stepRows()).map((r) => r.name)).toEqual(['heavy', 'fits']);
  });

  it('steps go with their DAG: retention\'s prune of a finished DAG deletes them, and so does deleting the DAG', async () => {
    const t = await claimed();
    await stepRecord(db, { taskId: t.id, fence: t.fence, name: 's', result: 1 });
    await taskComplete(db, { taskId: t.id, fence: t.fence, output: 1 });
    await db.execute(sql`update dags set completed_at = now() - interval '40 days', created_at = now() - interval '41 days' where id = ${t.dagId}`);
    expect((await prune(db, { olderThanSec: 30 * 86_400 })).tasks).toBe(1);
    expect(await stepRows()).toEqual([]);
    const u = await claimed('other');
    await stepRecord(db, { taskId: u.id, fence: u.fence, name: 's', result: 1 });
    await db.execute(sql`delete from dags where id = ${u.dagId}`);
    expect(await stepRows()).toEqual([]);
  });
});

describe('ctx.step in the TypeScript runtime', () => {
  it('a retry replays what the failed attempt recorded, runs only the rest, charges nothing for the replay, and counts its cost as replayed', async () => {
    const calls: string[] = [];
    const dagId = await dagCreate(db, RETRYING('replay'));
    await run(defineAgent({
      name: 'replayer', capabilities: ['replay'],
      async run(task, ctx) {
        const a = await ctx.step('a', () => {
          calls.push(`a${task.attempt}`);
          ctx.reportCost({ usd: 0.5, tokens: { input: 100, output: 10 }, model: 'm1' });
          return { n: 1, at: new Date(0) };
        });
        if (task.attempt === 1) throw new Error('crash after a');
        const b = await ctx.step('b', async () => {
          calls.push(`b${task.attempt}`);
          return 2;
        });
        return { a, b };
      },
    }), { id: 'replayer-1' });
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    expect(calls).toEqual(['a1', 'b2']);
    const [t] = await rowsOf<{ output: unknown }>(db, sql`select output from tasks where dag_id = ${dagId}`);
    // Replayed and first-run results are the same JSON (a Date is recorded as its ISO text).
    expect(t!.output).toEqual({ a: { n: 1, at: '1970-01-01T00:00:00.000Z' }, b: 2 });
    expect((await stepRows()).map((r) => [r.name, r.attempt, r.cost_usd])).toEqual([['a', 1, 0.5], ['b', 2, 0]]);
    const [task] = await rowsOf<{ id: string }>(db, sql`select id from tasks where dag_id = ${dagId}`);
    // The replay is on record with what the step had cost, under the attempt that replayed it.
    expect((await attemptListForTask(db, task!.id)).map((a) => [a.attempt, a.outcome, a.costUsd, a.replayedCostUsd]))
      .toEqual([[1, 'failed', 0.5, 0], [2, 'completed', 0, 0.5]]);
    expect(await rowsOf(db, sql`select name, attempt, cost_usd::float8 as cost from task_step_replays`)).toEqual([{ name: 'a', attempt: 2, cost: 0.5 }]);
    expect((await dagGet(db, dagId))!.spentUsd).toBeCloseTo(0.5);
    const logs = await rowsOf<{ message: string; step: string }>(db, sql`select message, fields->>'step' as step from attempt_logs order by id`);
    expect(logs).toEqual([{ message: 'step replayed', step: 'a' }]);
  });

  it('spend reported inside steps running at once is recorded with the step that reported it, and all of it with the attempt', async () => {
    const dagId = await dagCreate(db, RETRYING('parallel'));
    await run(defineAgent({
      name: 'parallel', capabilities: ['parallel'],
      async run(_task, ctx) {
        const call = (name: string, usd: number, ms: number) => ctx.step(name, async () => {
          ctx.reportCost({ usd: usd / 2 });
          await new Promise((r) => setTimeout(r, ms));
          ctx.reportCost({ usd: usd / 2, tokens: { input: usd * 100 } });
          return name;
        });
        ctx.reportCost({ usd: 0.001 });
        return Promise.all([call('slow', 0.4, 30), call('fast', 0.2, 1)]);
      },
    }), { id: 'parallel-1' });
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    expect((await stepRows()).map((r) => [r.name, r.cost_usd]).sort()).toEqual([['fast', 0.2], ['slow', 0.4]]);
    const [a] = await rowsOf<{ cost_usd: number; tokens_in: number }>(db, sql`select cost_usd::float8 as cost_usd, tokens_in::int as tokens_in from attempts where dag_id = ${dagId}`);
    expect(a!.cost_usd).toBeCloseTo(0.601);
    expect(a!.tokens_in).toBe(60);
  });

  it('a step that throws records nothing and its error reaches the handler; a name used twice in one attempt is an error naming it; attempt scope runs again in each attempt', async () => {
    const seen: Record<string, unknown> = {};
    let perAttempt = 0;
    const dagId = await dagCreate(db, RETRYING('rules'));
    await run(defineAgent({
      name: 'rules', capabilities: ['rules'],
      async run(task, ctx) {
        await ctx.step('fresh', () => ++perAttempt, { scope: 'attempt' });
        if (task.attempt === 1) {
          seen.thrown = await ctx.step('boom', () => { throw new Error('tool down'); }).catch((e: Error) => e.message);
          await ctx.step('once', () => 1);
          seen.reused = await ctx.step('once', () => 2).catch((e: Error) => e.message);
          throw new Error('retry me');
        }
        return ctx.step('boom', () => 'worked on attempt 2');
      },
    }), { id: 'rules-1' });
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    expect(seen).toEqual({ thrown: 'tool down', reused: 'step "once": the name is already used in this attempt; each step of an attempt needs a name of its own' });
    expect(perAttempt).toBe(2);
    expect((await stepRows()).map((r) => [r.name, r.scope, r.attempt, r.result])).toEqual([
      ['fresh', 'attempt', 1, 1], ['once', 'task', 1, 1], ['fresh', 'attempt', 2, 2], ['boom', 'task', 2, 'worked on attempt 2'],
    ]);
    const failed = await rowsOf<{ message: string }>(db, sql`select message from attempt_logs where level = 'warn' order by id`);
    expect(failed.map((l) => l.message)).toEqual(['step failed; nothing recorded']);
  });

  it('an output its validation rejects comes back for a retry that replays the task-scoped research and redoes the attempt-scoped answer', async () => {
    const calls: string[] = [];
    const dagId = await dagCreate(db, `name: judged
defaults: { max_attempts: 3, retry: { strategy: immediate } }
tasks:
  t:
    type: t
    spec: { constraints: { capabilities: [judged] } }
    output: { validation: { kind: regex, field: answer, pattern: "^final" } }
`);
    await run(defineAgent({
      name: 'judged', capabilities: ['judged'],
      async run(task, ctx) {
        const research = await ctx.step('research', () => { calls.push(`research ${task.attempt}`); return 'notes'; });
        const answer = await ctx.step('answer', () => {
          calls.push(`answer ${task.attempt}`);
          // The first answer is one the validation rejects; its retry sees why (previousAttempts) and does better.
          return task.previousAttempts.length === 0 ? 'draft' : 'final';
        }, { scope: 'attempt' });
        return { research, answer };
      },
    }), { id: 'judged-1' });
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    const [t] = await rowsOf<{ id: string; output: unknown }>(db, sql`select id, output from tasks where dag_id = ${dagId}`);
    expect(t!.output).toEqual({ research: 'notes', answer: 'final' });
    expect(calls).toEqual(['research 1', 'answer 1', 'answer 2']);
    expect((await attemptListForTask(db, t!.id)).map((a) => [a.outcome, a.errorClass])).toEqual([['failed', 'invalid_output'], ['completed', null]]);
    expect(await rowsOf(db, sql`select name, attempt from task_step_replays`)).toEqual([{ name: 'research', attempt: 2 }]);
  });
});
