import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { cliWith } from '../helpers/cli.js';
import { agentCreate, dagCreate, databaseReset, leaseExpire, retryDue, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { taskClaim, type ClaimedTask } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { dagCancel } from '../../src/engine/dag/cancel.js';
import { dlqCancel } from '../../src/engine/ops/dlq.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { promoterCreate } from '../../src/maintenance/promoter.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';
import { LeaseLostError } from '../../src/errors.js';
import { MetricsCollector } from '../../src/observability/metrics.js';

const database = await testDatabase();
const { db } = database;
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
beforeEach(() => databaseReset(db));

// Validation agents are driven by hand here, so each step of the protocol can be checked in between.
const DAG = `
name: judged
budget_usd: 5
tasks:
  essay:
    type: llm
    spec: { constraints: { capabilities: [write] } }
    output:
      validation:
        - { kind: test, command: "true" }
        - { kind: json-schema, schema: { type: object, required: [title] } }
        - { kind: llm-judge, rubric: "Is it good?", threshold: 0.5 }
`;

async function claim(agentId: string, capabilities: string[]): Promise<ClaimedTask> {
  await agentCreate(db, agentId, capabilities);
  const [t] = await taskClaim(db, agentId);
  expect(t).toBeDefined();
  return t!;
}

async function submitEssay(output: unknown = { title: 'On queues' }) {
  const dagId = await dagCreate(db, DAG);
  const essay = await claim('writer', ['write']);
  const r = await taskComplete(db, { taskId: essay.id, fence: essay.fence, output, costUsd: 0.5 });
  return { dagId, essay, settled: r.settled };
}

describe('delegated validation steps (test, llm-judge) as validation tasks', () => {
  it('walks the steps in order: a validation task per delegated step, inline steps in between, then COMPLETED', async () => {
    const { dagId, essay, settled } = await submitEssay();
    expect(settled).toMatchObject({ status: 'validating', step: 0 });
    expect(await taskStatusByKey(db, dagId)).toEqual({ essay: 'validating', 'essay/validate-1@1': 'ready' });

    // A validation task is claimed only by an agent with the step's capability.
    await agentCreate(db, 'other', ['write']);
    expect(await taskClaim(db, 'other')).toEqual([]);
    const test = await claim('tester', ['validate:test']);
    expect(test).toMatchObject({ type: 'validate:test', key: 'essay/validate-1@1' });
    expect(test.spec.input).toMatchObject({ step: { kind: 'test', command: 'true' }, output: { title: 'On queues' }, subject: { id: essay.id, key: 'essay', attempt: 1 } });
    const afterTest = await taskComplete(db, { taskId: test.id, fence: test.fence, output: { pass: true, exit_code: 0 } });
    // The json-schema step ran inline on the way; the judge step is next.
    expect(afterTest.settled).toMatchObject({ status: 'validating', step: 2 });

    const judge = await claim('judge', ['validate:judge']);
    expect(judge).toMatchObject({ type: 'validate:judge', key: 'essay/validate-3@1', spec: { prompt: 'Is it good?' } });
    const r = await taskComplete(db, { taskId: judge.id, fence: judge.fence, output: { pass: true, score: 0.6, reasons: ['fine'] }, costUsd: 0.25 });
    expect(r.settled).toMatchObject({ status: 'completed' });

    expect(await taskStatusByKey(db, dagId)).toEqual({ essay: 'completed', 'essay/validate-1@1': 'completed', 'essay/validate-3@1': 'completed' });
    const dag = (await dagGet(db, dagId))!;
    expect(dag).toMatchObject({ status: 'completed', tasksTotal: 3, tasksOpen: 0 });
    // The writer's cost and the judge's both count against the DAG.
    expect(dag.spentUsd).toBeCloseTo(0.75);
    const [attempt] = await rowsOf<{ outcome: string; cost: number; kinds: string[] }>(db, sql`
      select outcome, cost_usd::float8 as cost, array(select v->>'kind' from jsonb_array_elements(details->'verdicts') v) as kinds
      from attempts where task_id = ${essay.id}`);
    expect(attempt).toEqual({ outcome: 'completed', cost: 0.5, kinds: ['test', 'json-schema', 'llm-judge'] });
    const [row] = await rowsOf<{ output: unknown; cost: number }>(db, sql`select output, cost_usd::float8 as cost from tasks where id = ${essay.id}`);
    expect(row).toEqual({ output: { title: 'On queues' }, cost: 0.5 });
  });

  it('counts every completion once in the completion metric: the validated task under its type, each validation task under its own', async () => {
    const metrics = new MetricsCollector(db);
    try {
      const { essay } = await submitEssay();
      const completedOf = async () => Object.fromEntries([...(await metrics.metrics()).matchAll(/^dagent_tasks_completed_total\{type="([^"]+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]));
      // Submitting an output that goes on to validation completes nothing yet.
      expect(await completedOf()).toEqual({});
      const test = await claim('tester', ['validate:test']);
      await taskComplete(db, { taskId: test.id, fence: test.fence, output: { pass: true, exit_code: 0 } });
      expect(await completedOf()).toEqual({ 'validate:test': 1 });
      const judge = await claim('judge', ['validate:judge']);
      await taskComplete(db, { taskId: judge.id, fence: judge.fence, output: { pass: true, score: 0.9, reasons: [] } });
      expect(await completedOf()).toEqual({ 'validate:test': 1, 'validate:judge': 1, llm: 1 });
      expect(essay.type).toBe('llm');
    } finally {
      metrics.close();
    }
  });

  it('shows validation tasks in dagent status, beside the task they validate', async () => {
    const { dagId } = await submitEssay();
    const r = await cli('status', dagId);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/essay\s+validating\s+1\/3\s+writer/);
    expect(r.stdout).toMatch(/essay\/validate-1@1\s+ready\s+0\/5\s+\S+\s+50\s+validate:test/);
  });

  it('a zombie validation agent cannot settle what it no longer holds; the second run of the step decides', async () => {
    const { dagId } = await submitEssay();
    const first = await claim('tester-1', ['validate:test']);
    await leaseExpire(db, first.id);
    expect(await reaperCreate({ db }).runOnce()).toBe(1);
    await retryDue(db, first.id);
    await promoterCreate({ db }).runOnce();
    const second = await claim('tester-2', ['validate:test']);
    expect(second.id).toBe(first.id);
    await expect(taskComplete(db, { taskId: first.id, fence: first.fence, output: { pass: false, reasons: ['zombie says no'] } }))
      .rejects.toBeInstanceOf(LeaseLostError);
    expect((await taskStatusByKey(db, dagId)).essay).toBe('validating');
    await taskComplete(db, { taskId: second.id, fence: second.fence, output: { pass: true } });
    expect((await taskStatusByKey(db, dagId)).essay).toBe('validating'); // on to the judge step
  });

  it('refuses a second, different submission of the same attempt\'s output (409: an attempt has one result)', async () => {
    const { essay } = await submitEssay();
    await expect(taskComplete(db, { taskId: essay.id, fence: essay.fence, output: { title: 'again' } })).rejects.toThrow(/already reported a different output/);
  });

  it('a malformed verdict fails the validation task, not the validated one', async () => {
    const { dagId, essay } = await submitEssay();
    const test = await claim('tester', ['validate:test']);
    const r = await taskComplete(db, { taskId: test.id, fence: test.fence, output: { verdict: 'yes' } });
    expect(r.settled).toMatchObject({ status: 'verdict_invalid', failure: { status: 'retrying' } });
    expect(r.settled?.status === 'verdict_invalid' && r.settled.error).toContain('pass');
    expect(await taskStatusByKey(db, dagId)).toMatchObject({ essay: 'validating', 'essay/validate-1@1': 'retrying' });
    const [t] = await rowsOf<{ attempts: number }>(db, sql`select attempts from tasks where id = ${essay.id}`);
    expect(t!.attempts).toBe(1);
  });

  it('a judge step that names no model judges with the task\'s models: only a judge agent with one of them takes it', async () => {
    await dagCreate(db, `
name: judged-on-models
tasks:
  essay: { type: llm, spec: { models: [model-a], fallback_models: [model-b], constraints: { capabilities: [write] } }, output: { validation: { kind: llm-judge, rubric: "Good?", threshold: 0.5 } } }
`);
    await agentCreate(db, 'writer', ['write'], undefined, { models: ['model-a'] });
    const [essay] = await taskClaim(db, 'writer');
    await taskComplete(db, { taskId: essay!.id, fence: essay!.fence, output: { title: 'x' } });
    await agentCreate(db, 'other-judge', ['validate:judge'], undefined, { models: ['model-z'] });
    expect(await taskClaim(db, 'other-judge')).toEqual([]);
    await agentCreate(db, 'judge-b', ['validate:judge'], undefined, { models: ['model-b'] });
    const [judge] = await taskClaim(db, 'judge-b');
    expect([judge!.type, judge!.model]).toEqual(['validate:judge', 'model-b']);
  });

  it('a judge\'s verdict without a score is no verdict: the judge is retried, the judged task keeps its attempts', async () => {
    const dagId = await dagCreate(db, `
name: judged-only
tasks:
  essay: { type: llm, spec: { constraints: { capabilities: [write] } }, output: { validation: { kind: llm-judge, rubric: "Good?", threshold: 0.7 } } }
`);
    const essay = await claim('writer', ['write']);
    expect((await taskComplete(db, { taskId: essay.id, fence: essay.fence, output: { title: 'x' } })).settled).toMatchObject({ status: 'validating' });
    const judge = await claim('judge', ['validate:judge']);
    const r = await taskComplete(db, { taskId: judge.id, fence: judge.fence, output: { pass: true, reasons: ['trust me'] } });
    expect(r.settled).toMatchObject({ status: 'verdict_invalid', error: expect.stringContaining('score: required, the step\'s threshold 0.7') });
    expect(await taskStatusByKey(db, dagId)).toMatchObject({ essay: 'validating' });
    const [t] = await rowsOf<{ attempts: number }>(db, sql`select attempts from tasks where id = ${essay.id}`);
    expect(t!.attempts).toBe(1);
  });

  it('the same verdict sent again (its reply was lost) is a replay, not a conflict; a different one is a 409', async () => {
    const { essay } = await submitEssay();
    const test = await claim('tester', ['validate:test']);
    const verdict = { pass: true, reasons: ['exit 0'] };
    expect((await taskComplete(db, { taskId: test.id, fence: test.fence, output: verdict })).replayed).toBeUndefined();
    expect((await taskComplete(db, { taskId: test.id, fence: test.fence, output: verdict })).replayed).toBe(true);
    await expect(taskComplete(db, { taskId: test.id, fence: test.fence, output: { pass: false, reasons: ['no'] } })).rejects.toThrow(/different output/);
    // The writer's own completion made again while its output is under validation: a replay too.
    expect((await taskComplete(db, { taskId: essay.id, fence: essay.fence, output: { title: 'On queues' } })).replayed).toBe(true);
  });

  it('dlq cancel of a dead-lettered validation task gives up on the task it judged: cancelled, its agent\'s slot free, the DAG settled', async () => {
    const { dagId, essay } = await submitEssay();
    const test = await claim('tester', ['validate:test']);
    const failed = await taskFail(db, { taskId: test.id, fence: test.fence, errorClass: 'crash', message: 'validator broke', retryable: false });
    expect(failed.status).toBe('dead_lettered');
    const [entry] = await rowsOf<{ id: string }>(db, sql`select id from dead_letters where task_id = ${test.id}`);
    await dlqCancel(db, entry!.id, { note: 'give up' });
    expect(await taskStatusByKey(db, dagId)).toEqual({ essay: 'cancelled', 'essay/validate-1@1': 'cancelled' });
    expect((await dagGet(db, dagId))!.status).not.toBe('running');
    const [attempt] = await rowsOf<{ outcome: string }>(db, sql`select outcome from attempts where task_id = ${essay.id}`);
    expect(attempt).toEqual({ outcome: 'cancelled' });
    const [held] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from tasks where claimed_by = 'writer' and status in ('claimed', 'running', 'validating')`);
    expect(held!.n).toBe(0);
  });

  it('cancelling the DAG while a task is VALIDATING cancels its validation task too, and records the attempt as cancelled', async () => {
    const { dagId, essay } = await submitEssay();
    await claim('tester', ['validate:test']);
    const cancelled = await dagCancel(db, dagId);
    expect(cancelled.map((c) => [c.key, c.previous]).sort()).toEqual([['essay', 'validating'], ['essay/validate-1@1', 'claimed']]);
    expect((await dagGet(db, dagId))!.status).toBe('cancelled');
    const [attempt] = await rowsOf<{ outcome: string; error_class: string }>(db, sql`select outcome, error_class from attempts where task_id = ${essay.id}`);
    expect(attempt).toEqual({ outcome: 'cancelled', error_class: 'cancelled' });
  });
});
