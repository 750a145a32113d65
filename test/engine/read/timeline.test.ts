import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../../helpers/db.js';
import { testHttp } from '../../helpers/http.js';
import { timePasses } from '../../helpers/clock.js';
import { agentCreate, dagCreate, databaseReset, leaseExpire, rowsOf } from '../../helpers/factories.js';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { taskFail } from '../../../src/engine/attempt/fail.js';
import { taskSpawn } from '../../../src/engine/dag/spawn.js';
import { stepRecord, stepReplay } from '../../../src/engine/attempt/steps.js';
import { reaperCreate } from '../../../src/maintenance/reaper.js';
import { dagTimeline, type DagTimeline } from '../../../src/engine/read/timeline.js';

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
beforeEach(() => databaseReset(db));

/** Time passes between two steps (the stretches get lengths), without waiting: the recorded instants move back. */
const elapse = (ms: number) => timePasses(db, ms);
const kinds = (tl: DagTimeline, key: string) => tl.tasks.find((t) => t.key === key)!.segments.map((s) => s.kind === 'running' ? `running:${s.outcome}` : s.kind);

// Two branches after `plan`: `slow` takes longer than `quick`, so `report` waits on `slow`, and the path through it is critical.
const DAG = `
name: timed
tasks:
  plan: { type: t, max_attempts: 2, retry: { strategy: immediate } }
  quick: { type: t, depends_on: [plan] }
  slow:
    type: t
    depends_on: [plan]
    output:
      validation:
        - { kind: test, command: "true" }
  report: { type: t, depends_on: [quick, slow] }
`;

async function claimKey(agent: string, key: string) {
  for (let i = 0; i < 20; i++) {
    const [t] = await taskClaim(db, agent, { start: true });
    if (t?.key === key) return t;
    if (t) throw new Error(`claimed ${t.key}, wanted ${key}`);
    await elapse(20);
  }
  throw new Error(`${key} never became claimable`);
}

describe('a DAG\'s timeline', () => {
  it('shows queued, running (by outcome), retry-wait and validating stretches per task, the critical path as it happened, and cost per model', async () => {
    const dagId = await dagCreate(db, DAG);
    await agentCreate(db, 'w');
    await agentCreate(db, 'tester', ['validate:test']);
    await elapse(30);
    const plan1 = await claimKey('w', 'plan');
    await elapse(30);
    await taskFail(db, { taskId: plan1.id, fence: plan1.fence, errorClass: 'crash', message: 'boom', costUsd: 0.1, model: 'small' });
    await elapse(30);
    const plan2 = await claimKey('w', 'plan');
    await elapse(20);
    await taskComplete(db, { taskId: plan2.id, fence: plan2.fence, output: {}, costUsd: 0.2, model: 'small', tokensIn: 100, tokensOut: 10 });

    const [first] = await taskClaim(db, 'w', { start: true, limit: 1 });
    const [second] = await taskClaim(db, 'w', { start: true, limit: 1 });
    const byKey = Object.fromEntries([first!, second!].map((t) => [t.key, t]));
    await taskComplete(db, { taskId: byKey.quick!.id, fence: byKey.quick!.fence, output: {}, costUsd: 0.3, model: 'large' });
    await elapse(30);
    const submitted = await taskComplete(db, { taskId: byKey.slow!.id, fence: byKey.slow!.fence, output: {}, costUsd: 0.4, model: 'large' });
    expect(submitted.settled).toMatchObject({ status: 'validating' });

    // While `slow` is with its validator, the timeline says so, and `report` has not started.
    const midway = await dagTimeline(db, dagId);
    expect(kinds(midway, 'slow')).toEqual(['queued', 'running:validating', 'validating']);
    expect(kinds(midway, 'report')).toEqual([]);

    await elapse(30);
    const check = await claimKey('tester', 'slow/validate-1@1');
    await taskComplete(db, { taskId: check.id, fence: check.fence, output: { pass: true } });
    const report = await claimKey('w', 'report');
    await elapse(20);
    await taskComplete(db, { taskId: report.id, fence: report.fence, output: {}, costUsd: 0.05 });

    const tl = await dagTimeline(db, dagId);
    expect(kinds(tl, 'plan')).toEqual(['queued', 'running:failed', 'retry_wait', 'running:completed']);
    expect(kinds(tl, 'quick')).toEqual(['queued', 'running:completed']);
    expect(kinds(tl, 'slow')).toEqual(['queued', 'running:completed', 'validating']);
    expect(kinds(tl, 'report')).toEqual(['queued', 'running:completed']);
    // Validation tasks are not rows of their own: they are their task's validating stretch.
    expect(tl.tasks.map((t) => t.key)).toEqual(['plan', 'quick', 'slow', 'report']);

    // The stretches follow each other, within the DAG's run, in the attempts' own times.
    const [a1, a2] = await rowsOf<{ started_at: string; ended_at: string }>(db, sql`
      select a.started_at::text, a.ended_at::text from attempts a join tasks t on t.id = a.task_id where t.key = 'plan' and t.dag_id = ${dagId} order by a.fence`);
    const plan = tl.tasks.find((t) => t.key === 'plan')!.segments;
    expect(plan.map((s) => [s.from.getTime(), s.to.getTime()])).toEqual([
      [plan[0]!.from.getTime(), Date.parse(a1!.started_at)],
      [Date.parse(a1!.started_at), Date.parse(a1!.ended_at)],
      [Date.parse(a1!.ended_at), Date.parse(a2!.started_at)],
      [Date.parse(a2!.started_at), Date.parse(a2!.ended_at)],
    ]);
    for (const t of tl.tasks) for (const s of t.segments) expect(s.from <= s.to && s.from >= tl.from && s.to <= tl.to).toBe(true);

    expect(tl.criticalPath).toEqual(['plan', 'slow', 'report']);
    expect(tl.tasks.filter((t) => t.critical).map((t) => t.key)).toEqual(['plan', 'slow', 'report']);
    expect(tl.costByModel).toEqual([
      { model: 'large', costUsd: 0.7, tokensIn: 0, tokensOut: 0, attempts: 2 },
      { model: 'small', costUsd: expect.closeTo(0.3, 9), tokensIn: 100, tokensOut: 10, attempts: 2 },
      { model: null, costUsd: 0.05, tokensIn: 0, tokensOut: 0, attempts: 2 },
    ]);
    expect(tl.tasks.find((t) => t.key === 'plan')!.costUsd).toBeCloseTo(0.3);

    // Over HTTP, as the dashboard reads it; an unknown DAG is a 404.
    const r = await http.call('GET', `/api/dags/${dagId}/timeline`);
    expect(r.status).toBe(200);
    expect(r.body.criticalPath).toEqual(['plan', 'slow', 'report']);
    expect(r.body.tasks[0].segments[0]).toMatchObject({ kind: 'queued', from: expect.stringMatching(/^\d{4}-/) });
    expect((await http.call('GET', '/api/dags/dag_nope/timeline')).status).toBe(404);
  });

  it('tasks that began at once are in key order, w2 before w10, as the dashboard draws their rows', async () => {
    const keys = Array.from({ length: 13 }, (_, i) => `w${i}`);
    // Declared last first: neither the file's order nor the rows' is natural by chance.
    const dagId = await dagCreate(db, `name: numbered\ntasks:\n${[...keys].reverse().map((k) => `  ${k}: { type: t }`).join('\n')}\n`);
    await elapse(20);
    const tl = await dagTimeline(db, dagId);
    expect(tl.tasks.map((t) => t.segments.map((s) => s.kind))).toEqual(keys.map(() => ['queued']));
    expect(tl.tasks.map((t) => t.key)).toEqual(keys);
    expect((await http.call('GET', `/api/dags/${dagId}/timeline`)).body.tasks.map((t: { key: string }) => t.key)).toEqual(keys);
  });

  it('an attempt that spawned subtasks to wait for is followed by a waiting stretch until the task runs again', async () => {
    const dagId = await dagCreate(db, 'name: parent\ntasks:\n  boss: { type: t }\n');
    await agentCreate(db, 'w');
    await elapse(20);
    const [boss] = await taskClaim(db, 'w', { start: true });
    await taskSpawn(db, { taskId: boss!.id, fence: boss!.fence }, [{ key: 'helper', type: 't' }], { wait: true });
    expect(kinds(await dagTimeline(db, dagId), 'boss')).toEqual(['queued', 'running:waiting', 'waiting']);
    await elapse(20);
    const [helper] = await taskClaim(db, 'w', { start: true });
    expect(helper!.key).toBe('boss/helper');
    await taskComplete(db, { taskId: helper!.id, fence: helper!.fence, output: {} });
    const [again] = await taskClaim(db, 'w', { start: true });
    await taskComplete(db, { taskId: again!.id, fence: again!.fence, output: {} });
    const tl = await dagTimeline(db, dagId);
    expect(kinds(tl, 'boss')).toEqual(['queued', 'running:waiting', 'waiting', 'running:completed']);
    expect(tl.tasks.find((t) => t.key === 'boss/helper')!.parentKey).toBe('boss');
  });

  it('an attempt claimed and finished within one millisecond still shows as a run', async () => {
    const dagId = await dagCreate(db, 'name: quick\ntasks:\n  a: { type: t }\n');
    await agentCreate(db, 'fast');
    await elapse(5);
    const [a] = await taskClaim(db, 'fast', { start: true });
    await taskComplete(db, { taskId: a!.id, fence: a!.fence, output: {} });
    // As when the two statements fall within the same millisecond (the times reach the timeline in milliseconds).
    await db.execute(sql`update attempts set ended_at = started_at where task_id = ${a!.id}`);
    expect(kinds(await dagTimeline(db, dagId), 'a')).toEqual(['queued', 'running:completed']);
  });

  it('a task still running, or waiting for its retry, runs to now', async () => {
    const dagId = await dagCreate(db, 'name: open\ntasks:\n  a: { type: t, max_attempts: 3, retry: { strategy: fixed, initial_delay: 1h, jitter: 0 } }\n  b: { type: t }\n');
    await agentCreate(db, 'w');
    const [a, b] = await taskClaim(db, 'w', { start: true, limit: 2 });
    await taskFail(db, { taskId: a!.id, fence: a!.fence, errorClass: 'crash', message: 'later' });
    const tl = await dagTimeline(db, dagId);
    expect(kinds(tl, a!.key)).toEqual(expect.arrayContaining(['running:failed', 'retry_wait']));
    expect(kinds(tl, b!.key).at(-1)).toBe('running:running');
    for (const t of tl.tasks) expect(t.segments.at(-1)!.to.getTime()).toBe(tl.to.getTime());
  });

  it('carries the durable steps each attempt recorded, from when their work began to their recording, and those a later attempt replayed', async () => {
    const dagId = await dagCreate(db, 'name: stepped\ndefaults: { max_attempts: 3, retry: { strategy: immediate } }\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');
    await agentCreate(db, 'w');
    await elapse(20);
    const first = await claimKey('w', 'a');
    await elapse(40);
    const ref = { taskId: first.id, fence: first.fence };
    await stepRecord(db, { ...ref, name: 'search', result: { hits: 3 }, durationMs: 25, costUsd: 0.25 });
    // A start its agent made up, an hour before the attempt began: the bar begins with the attempt.
    await stepRecord(db, { ...ref, name: 'scratch', result: null, scope: 'attempt', startedAt: new Date(Date.now() - 3_600_000) });
    await stepRecord(db, { ...ref, name: 'instant', result: 1 });
    await elapse(30);
    await leaseExpire(db, first.id);
    expect(await reaperCreate({ db }).runOnce()).toBe(1);
    const second = await claimKey('w', 'a');
    await elapse(10);
    expect((await stepReplay(db, { taskId: second.id, fence: second.fence }, 'search'))?.result).toEqual({ hits: 3 });
    await elapse(10);
    await taskComplete(db, { taskId: second.id, fence: second.fence, output: {} });

    const tl = await dagTimeline(db, dagId);
    const a = tl.tasks.find((t) => t.key === 'a')!;
    expect(a.steps.map((st) => [st.name, st.scope, st.attempt, st.fence, st.costUsd, st.durationMs])).toEqual([
      ['search', 'task', first.attempt, first.fence, 0.25, 25], ['scratch', 'attempt', first.attempt, first.fence, 0, null], ['instant', 'task', first.attempt, first.fence, 0, null],
    ]);
    const recorded = new Map((await rowsOf<{ name: string; recorded_at: string }>(db, sql`
      select name, recorded_at::text from task_steps where task_id = ${first.id}`)).map((r) => [r.name, Date.parse(r.recorded_at)]));
    const [run1] = await rowsOf<{ started_at: string }>(db, sql`select started_at::text from attempts where task_id = ${first.id} and fence = ${first.fence}`);
    const span = (name: string) => { const st = a.steps.find((x) => x.name === name)!; return [st.from.getTime(), st.to.getTime()]; };
    expect(span('search')).toEqual([recorded.get('search')! - 25, recorded.get('search')!]);
    expect(span('scratch')).toEqual([Date.parse(run1!.started_at), recorded.get('scratch')!]);
    expect(span('instant')).toEqual([recorded.get('instant')!, recorded.get('instant')!]);
    // Each bar lies within its attempt's run; the replay within the attempt that made it.
    const runs = a.segments.filter((sg) => sg.kind === 'running');
    for (const st of a.steps) expect(st.from >= runs[0]!.from && st.to <= runs[0]!.to).toBe(true);
    expect(a.replays).toEqual([{ name: 'search', attempt: second.attempt, fence: second.fence, recordedFence: first.fence, costUsd: 0.25, replayedAt: expect.any(Date) }]);
    expect(a.replays[0]!.replayedAt >= runs[1]!.from && a.replays[0]!.replayedAt <= runs[1]!.to).toBe(true);
    expect(tl.tasks.find((t) => t.key === 'b')).toMatchObject({ steps: [], replays: [] });

    // Over HTTP, as the dashboard draws them.
    const r = await http.call('GET', `/api/dags/${dagId}/timeline`);
    const wire = r.body.tasks.find((t: { key: string }) => t.key === 'a');
    expect(wire.steps[0]).toEqual({ name: 'search', scope: 'task', attempt: first.attempt, fence: first.fence, durationMs: 25, costUsd: 0.25,
      from: new Date(recorded.get('search')! - 25).toISOString(), to: new Date(recorded.get('search')!).toISOString() });
    expect(wire.replays[0]).toMatchObject({ name: 'search', costUsd: 0.25, replayedAt: a.replays[0]!.replayedAt.toISOString() });
  });
});
