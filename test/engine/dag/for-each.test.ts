import { execFile } from 'node:child_process';
import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { dagSourceLoad } from '../../../src/dag/load.js';
import { dagSubmit } from '../../../src/engine/dag/submit.js';
import { dagGet } from '../../../src/db/queries/dags.js';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { taskSpawn } from '../../../src/engine/dag/spawn.js';
import { dlqList, dlqRetry } from '../../../src/engine/ops/dlq.js';
import { mapTasksSettle } from '../../../src/engine/dag/map.js';
import { databaseOpen } from '../../../src/db/open.js';
import { testDatabase } from '../../helpers/db.js';
import { CLI_COMPILED } from '../../helpers/cli.js';
import { agentCreate, databaseReset, drain, rowsOf, taskStatusByKey } from '../../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
beforeEach(() => databaseReset(db));

const settle = () => mapTasksSettle(db, { batch: 100 });

const plannerDag = (extra = '') => `
name: fan-out
tasks:
  plan: { type: plan }
  review:
    type: review
    depends_on: [plan]
    for_each: plan.files
    spec: { prompt: Review the file in input.item, input: { style: strict } }
    max_attempts: 2
${extra}
  synth:
    type: synth
    depends_on: [review]
    spec: { context: [review] }
`;

async function submit(yaml: string, params: Record<string, string> = {}) {
  const [r] = await dagSubmit(db, [await dagSourceLoad(yaml, 'fan-out.yaml', { params })]);
  return r!.dagId;
}

async function completeByKey(agentId: string, key: string, output: unknown) {
  const [t] = await rowsOf<{ id: string }>(db, sql`select id from tasks where key = ${key}`);
  const claimed = await taskClaim(db, agentId, { limit: 100 });
  const mine = claimed.find((c) => c.id === t!.id)!;
  expect(mine, `${key} was claimable`).toBeDefined();
  await taskComplete(db, { taskId: mine.id, fence: mine.fence, output });
  // What else was claimed goes back.
  for (const c of claimed) if (c.id !== mine.id) await db.execute(sql`update tasks set status = 'ready', claimed_by = null where id = ${c.id}`);
}

describe('for_each over a list in an upstream output', () => {
  it('adds a child per item with the item in its input, and completes with their outputs in item order', async () => {
    const dagId = await submit(plannerDag());
    const agent = await agentCreate(db, 'worker');
    await completeByKey(agent, 'plan', { files: ['a.ts', 'b.ts', 'c.ts'] });
    // The mapped task waits for the loop: no agent can claim it.
    expect((await taskStatusByKey(db, dagId)).review).toBe('waiting');
    expect(await settle()).toBe(1);
    const children = await rowsOf<{ key: string; status: string; input: Record<string, unknown>; origin: string; maxAttempts: number }>(db, sql`
      select key, status, spec->'input' as input, origin, max_attempts as "maxAttempts" from tasks where parent_id is not null order by key`);
    expect(children).toEqual([0, 1, 2].map((i) => ({
      key: `review/${i}`, status: 'ready', input: { style: 'strict', item: ['a.ts', 'b.ts', 'c.ts'][i], index: i }, origin: 'template', maxAttempts: 2,
    })));
    expect((await taskStatusByKey(db, dagId)).review).toBe('pending');
    const [mapped] = await rowsOf<{ data: unknown }>(db, sql`select data from events where type = 'task.mapped'`);
    expect(mapped!.data).toMatchObject({ subtasks: ['review/0', 'review/1', 'review/2'] });
    // Completed out of order: the list is in item order all the same.
    for (const i of [2, 0, 1]) await completeByKey(agent, `review/${i}`, { verdict: `ok ${i}` });
    expect((await taskStatusByKey(db, dagId)).review).toBe('waiting');
    expect(await settle()).toBe(1);
    const [review] = await rowsOf<{ status: string; output: unknown }>(db, sql`select status, output from tasks where key = 'review'`);
    expect(review).toEqual({ status: 'completed', output: [{ verdict: 'ok 0' }, { verdict: 'ok 1' }, { verdict: 'ok 2' }] });
    const [synth] = await taskClaim(db, agent);
    expect(synth!.key).toBe('synth');
    expect(synth!.inputs).toEqual({ review: [{ verdict: 'ok 0' }, { verdict: 'ok 1' }, { verdict: 'ok 2' }] });
    await taskComplete(db, { taskId: synth!.id, fence: synth!.fence, output: { done: true } });
    expect((await dagGet(db, dagId))!.status).toBe('completed');
  });

  it('an empty list completes the task with [] and the DAG runs on', async () => {
    const dagId = await submit(plannerDag());
    const agent = await agentCreate(db, 'worker');
    await completeByKey(agent, 'plan', { files: [] });
    expect(await settle()).toBe(1);
    const [review] = await rowsOf<{ status: string; output: unknown }>(db, sql`select status, output from tasks where key = 'review'`);
    expect(review).toEqual({ status: 'completed', output: [] });
    expect((await taskStatusByKey(db, dagId)).synth).toBe('ready');
  });

  it('a value that is not a list dead-letters the task with class invalid_input; retried once the list is right, it maps', async () => {
    const dagId = await submit(plannerDag());
    const agent = await agentCreate(db, 'worker');
    await completeByKey(agent, 'plan', { files: 'a.ts' });
    expect(await settle()).toBe(1);
    expect((await taskStatusByKey(db, dagId)).review).toBe('dead_lettered');
    const [entry] = await dlqList(db);
    expect(entry).toMatchObject({ errorClass: 'invalid_input' });
    const [attempt] = await rowsOf<{ message: string }>(db, sql`select error_message as message from attempts where outcome = 'failed'`);
    expect(attempt!.message).toBe('for_each: plan.files is a string, not a list');
    expect(await rowsOf(db, sql`select 1 from tasks where parent_id is not null`)).toEqual([]);
    // A person fixes the plan's output and retries: the task waits again and maps the list it finds now.
    await db.execute(sql`update tasks set output = '{"files": ["x.ts"]}' where key = 'plan'`);
    await dlqRetry(db, entry!.id);
    expect(await settle()).toBe(1);
    expect(await rowsOf(db, sql`select key from tasks where parent_id is not null`)).toEqual([{ key: 'review/0' }]);
  });

  it('two loops racing over the same task add its children once', async () => {
    await submit(plannerDag());
    const agent = await agentCreate(db, 'worker');
    await completeByKey(agent, 'plan', { files: Array.from({ length: 50 }, (_, i) => `f${i}.ts`) });
    const other = await databaseOpen({ url: database.url, migrate: false, poolSize: 4 });
    try {
      const [a, b] = await Promise.all([settle(), mapTasksSettle(other.db, { batch: 100 })]);
      expect(a + b).toBe(1);
    } finally {
      await other.close();
    }
    const [n] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from tasks where parent_id is not null`);
    expect(n!.n).toBe(50);
    const [edges] = await rowsOf<{ n: number }>(db, sql`
      select count(*)::int as n from edges e join tasks d on d.id = e.downstream_id where d.key = 'review'`);
    expect(edges!.n).toBe(51); // plan, and each child
  });

  it('its children do not use up what the DAG lets agents spawn', async () => {
    await submit(`${plannerDag()}
spawn: { max_tasks: 1 }
`);
    const agent = await agentCreate(db, 'worker');
    await completeByKey(agent, 'plan', { files: ['a', 'b', 'c'] });
    await settle();
    const [child] = (await taskClaim(db, agent, { limit: 10 })).filter((c) => c.key === 'review/0');
    const spawned = await taskSpawn(db, { taskId: child!.id, fence: child!.fence }, [{ key: 'note', type: 'note' }]);
    expect(spawned.children.map((c) => c.key)).toEqual(['note']);
    await expect(taskSpawn(db, { taskId: child!.id, fence: child!.fence }, [{ key: 'more', type: 'note' }])).rejects.toThrow(/lets its agents add 1 subtasks in all/);
  });
});

describe('for_each over a list param or a written list', () => {
  const paramDag = `
name: per-repo
params:
  repos: [api, web]
tasks:
  audit:
    type: audit
    for_each: \${params.repos}
    spec: { prompt: "Audit the repos: \${params.repos}" }
  report: { type: report, depends_on: [audit], spec: { context: [audit] } }
`;

  it('maps over the default, a comma list or a JSON list from --param; in text the list reads as its items', async () => {
    for (const [given, expected] of [[undefined, ['api', 'web']], ['a, b,c', ['a', 'b', 'c']], ['["x y", "z"]', ['x y', 'z']]] as const) {
      await databaseReset(db);
      const spec = await dagSourceLoad(paramDag, 'per-repo.yaml', { params: given === undefined ? {} : { repos: given } });
      expect(spec.tasks[0]!.forEach).toEqual({ items: expected });
      expect(spec.params.repos).toEqual(expected);
      expect(spec.tasks[0]!.body.prompt).toBe(`Audit the repos: ${expected.join(', ')}`);
      await dagSubmit(db, [spec]);
      expect(await settle()).toBe(1);
      const items = await rowsOf<{ item: string; origin: string }>(db, sql`select spec->'input'->>'item' as item, origin from tasks where parent_id is not null order by key`);
      // A list the DAG's submitter gave is the author's data: the children's origin stays dag.
      expect(items).toEqual(expected.map((item) => ({ item, origin: 'dag' })));
    }
  });

  it('a --param for a list that is not one is refused, naming the param', async () => {
    await expect(dagSourceLoad(paramDag, 'per-repo.yaml', { params: { repos: '[1, {"a": 2}]' } })).rejects.toThrow(/--param repos=\[1, \{"a": 2\}\]: expected a list/);
  });

  it('a written list maps with the whole DAG run by the waits loop, and a parent and its children show in the DAG', async () => {
    const dagId = await submit(`
name: literal
tasks:
  greet: { type: greet, for_each: [{ name: ada }, { name: alan }] }
`);
    const agent = await agentCreate(db, 'worker');
    await settle();
    const done = await drain(db, agent, (k) => ({ said: `hello from ${k}` }));
    expect(done.sort()).toEqual(['greet/0', 'greet/1']);
    await settle();
    const [greet] = await rowsOf<{ output: unknown }>(db, sql`select output from tasks where key = 'greet'`);
    expect(greet!.output).toEqual([{ said: 'hello from greet/0' }, { said: 'hello from greet/1' }]);
    expect((await dagGet(db, dagId))!.status).toBe('completed');
  });
});

/** One pass of the waits loop's mapping in a child process whose limits `env` lowers (LIMITS is read at start-up). */
async function settleWith(limits: Record<string, string>): Promise<string> {
  const script = `
    import { databaseOpen } from './src/db/open.ts';
    import { mapTasksSettle } from './src/engine/dag/map.ts';
    const d = await databaseOpen({ url: process.env.DATABASE_URL, migrate: false, poolSize: 2 });
    console.log(await mapTasksSettle(d.db, { batch: 10 }));
    await d.close();`;
  const env = { ...process.env, DATABASE_URL: database.url, ...limits };
  const out = await new Promise<string>((resolve, reject) => execFile(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { env, timeout: 60_000 },
    (err, stdout, stderr) => (err ? reject(new Error(stderr)) : resolve(stdout))));
  return out.trim();
}

async function failedAttempt() {
  const [a] = await rowsOf<{ message: string; cls: string }>(db, sql`select error_message as message, error_class as cls from attempts where outcome = 'failed'`);
  return a;
}

describe('limits on a for_each', () => {
  it('a list longer than DAGENT_LIMIT_MAP_ITEMS fails the task at runtime, naming the limit; a written one is refused at submit', async () => {
    await submit(plannerDag());
    const agent = await agentCreate(db, 'worker');
    await completeByKey(agent, 'plan', { files: ['a', 'b', 'c'] });
    expect(await settleWith({ DAGENT_LIMIT_MAP_ITEMS: '2' })).toBe('1');
    expect(await failedAttempt()).toEqual({ cls: 'invalid_input', message: 'for_each: plan.files has 3 items; a for_each maps over at most 2 (DAGENT_LIMIT_MAP_ITEMS)' });

    const env = { ...process.env, DATABASE_URL: database.url, DAGENT_LIMIT_MAP_ITEMS: '2' };
    const submitted = await new Promise<{ code: number; stderr: string }>((resolve) => execFile(process.execPath, [...CLI_COMPILED, 'submit', 'test/fixtures/dags/for-each-three.yaml'], { env, timeout: 60_000 },
      (err, _stdout, stderr) => resolve({ code: err ? Number(err.code) : 0, stderr: String(stderr) })));
    expect(submitted.code, submitted.stderr).toBe(2);
    expect(submitted.stderr).toContain('test/fixtures/dags/for-each-three.yaml:4:5 tasks.hello.for_each: 3 items; a for_each maps over at most 2 (DAGENT_LIMIT_MAP_ITEMS)');
  });

  it('children the DAG\'s task limit refuses fail the task (dead-lettered, nothing added), and the next DAG\'s for_each still maps', async () => {
    const first = await submit(plannerDag());
    const agent = await agentCreate(db, 'worker');
    await completeByKey(agent, 'plan', { files: ['a', 'b', 'c', 'd', 'e'] });
    expect(await settleWith({ DAGENT_LIMIT_TASKS_PER_DAG: '6' })).toBe('1');
    expect((await taskStatusByKey(db, first)).review).toBe('dead_lettered');
    expect((await failedAttempt())!.message).toMatch(/^for_each: its children could not be added: spawn from review: DAG \S+ has 3 tasks; 5 more would pass the limit of 6/);
    expect(await rowsOf(db, sql`select 1 from tasks where parent_id is not null`)).toEqual([]);
    // Failed, it no longer waits at the head of the loop's passes: another DAG's for_each maps.
    const second = await submit(plannerDag().replace('name: fan-out', 'name: fan-out-2'));
    const [plan2] = await rowsOf<{ id: string }>(db, sql`select id from tasks where dag_id = ${second} and key = 'plan'`);
    const [c] = (await taskClaim(db, agent, { limit: 10 })).filter((t) => t.id === plan2!.id);
    await taskComplete(db, { taskId: c!.id, fence: c!.fence, output: { files: ['x'] } });
    expect(await settleWith({ DAGENT_LIMIT_TASKS_PER_DAG: '6' })).toBe('1');
    expect((await taskStatusByKey(db, second)).review).toBe('pending');
  });

  it('a long spec times many items is refused before anything is written', async () => {
    await submit(plannerDag().replace('Review the file in input.item', 'x'.repeat(2000)));
    const agent = await agentCreate(db, 'worker');
    await completeByKey(agent, 'plan', { files: Array.from({ length: 20 }, (_, i) => `f${i}`) });
    expect(await settleWith({ DAGENT_LIMIT_MAP_SPEC_BYTES: '20000' })).toBe('1');
    expect((await failedAttempt())!.message).toMatch(/^for_each: 20 children of this task's spec would be \d+ bytes; at most 20000 \(DAGENT_LIMIT_MAP_SPEC_BYTES\)/);
    expect(await rowsOf(db, sql`select 1 from tasks where parent_id is not null`)).toEqual([]);
  });

  it('children\'s outputs too large together fail the task, measured before they are read; outputs at full depth fit in the list', async () => {
    await submit(plannerDag());
    const agent = await agentCreate(db, 'worker');
    await completeByKey(agent, 'plan', { files: ['a', 'b'] });
    await settle();
    // Each child's output as deep as an output may be: the list around them is one level deeper, and allowed.
    let deep: unknown = 'bottom';
    for (let i = 0; i < 63; i++) deep = { d: deep };
    await completeByKey(agent, 'review/0', deep);
    await completeByKey(agent, 'review/1', { blob: 'z'.repeat(5_000) });
    expect(await settleWith({ DAGENT_LIMIT_MAP_OUTPUT_BYTES: '4000' })).toBe('1');
    expect((await failedAttempt())!.message).toMatch(/^for_each: its 2 children's outputs are \d+ bytes as JSON; their list may be at most 4000 \(DAGENT_LIMIT_MAP_OUTPUT_BYTES\)$/);
    const [entry] = await dlqList(db);
    await dlqRetry(db, entry!.id);
    expect(await settle()).toBe(1);
    const [review] = await rowsOf<{ status: string; n: number }>(db, sql`select status, jsonb_array_length(output) as n from tasks where key = 'review'`);
    expect(review).toEqual({ status: 'completed', n: 2 });
  });

  it('cancelling a for_each task cancels its children', async () => {
    const dagId = await submit(plannerDag());
    const agent = await agentCreate(db, 'worker');
    await completeByKey(agent, 'plan', { files: ['a', 'b'] });
    await settle();
    const [review] = await rowsOf<{ id: string }>(db, sql`select id from tasks where key = 'review'`);
    const { taskCancel } = await import('../../../src/engine/dag/cancel.js');
    const cancelled = await taskCancel(db, review!.id);
    expect(cancelled.map((c) => c.key).sort()).toEqual(['review', 'review/0', 'review/1', 'synth']);
    expect(await taskClaim(db, agent, { limit: 10 })).toEqual([]);
    expect(Object.values(await taskStatusByKey(db, dagId)).filter((s) => s !== 'cancelled')).toEqual(['completed']); // plan
  });
});

describe('re-running a for_each task', () => {
  it('re-run with its upstream, it maps the new list; the previous children stay as history, renamed and detached', async () => {
    const dagId = await submit(plannerDag());
    const agent = await agentCreate(db, 'worker');
    await completeByKey(agent, 'plan', { files: ['a', 'b'] });
    await settle();
    for (const k of ['review/0', 'review/1']) await completeByKey(agent, k, { old: k });
    await settle();
    const [plan] = await rowsOf<{ id: string }>(db, sql`select id from tasks where key = 'plan'`);
    const { taskRerun } = await import('../../../src/engine/dag/rerun.js');
    const r = await taskRerun(db, plan!.id, { downstream: true });
    expect(r.reopened.map((t) => t.key).sort()).toEqual(['plan', 'review']); // synth had not run: it waits again
    await completeByKey(agent, 'plan', { files: ['x', 'y', 'z'] });
    expect(await settle()).toBe(1);
    const rows = await rowsOf<{ key: string; parent: string | null; status: string; item: string }>(db, sql`
      select key, (select key from tasks p where p.id = t.parent_id) as parent, status, spec->'input'->>'item' as item
      from tasks t where key like 'review/%' order by parent nulls first, key`);
    expect(rows.map((x) => ({ ...x, key: x.key.replace(/~\d+$/, '~N') }))).toEqual([
      { key: 'review/0~N', parent: null, status: 'completed', item: 'a' },
      { key: 'review/1~N', parent: null, status: 'completed', item: 'b' },
      { key: 'review/0', parent: 'review', status: 'ready', item: 'x' },
      { key: 'review/1', parent: 'review', status: 'ready', item: 'y' },
      { key: 'review/2', parent: 'review', status: 'ready', item: 'z' },
    ]);
    for (const k of ['review/0', 'review/1', 'review/2']) await completeByKey(agent, k, { now: k });
    await settle();
    const [review] = await rowsOf<{ output: unknown }>(db, sql`select output from tasks where key = 'review'`);
    expect(review!.output).toEqual([{ now: 'review/0' }, { now: 'review/1' }, { now: 'review/2' }]);
    expect((await taskStatusByKey(db, dagId)).synth).toBe('ready');
  });

  it('one child re-run with --downstream runs alone, and the task collects again with its new output', async () => {
    await submit(plannerDag());
    const agent = await agentCreate(db, 'worker');
    await completeByKey(agent, 'plan', { files: ['a', 'b'] });
    await settle();
    for (const k of ['review/0', 'review/1']) await completeByKey(agent, k, { run: 1 });
    await settle();
    const [child] = await rowsOf<{ id: string }>(db, sql`select id from tasks where key = 'review/1'`);
    const { taskRerun } = await import('../../../src/engine/dag/rerun.js');
    const r = await taskRerun(db, child!.id, { downstream: true });
    expect(r.reopened.map((t) => t.key).sort()).toEqual(['review', 'review/1']);
    await completeByKey(agent, 'review/1', { run: 2 });
    expect(await settle()).toBe(1);
    const [review] = await rowsOf<{ output: unknown }>(db, sql`select output from tasks where key = 'review'`);
    expect(review!.output).toEqual([{ run: 1 }, { run: 2 }]);
    expect(await rowsOf(db, sql`select key from tasks where key like '%~%'`)).toEqual([]);
  });
});

describe('re-running upstream of a for_each at work', () => {
  it('is a 409 while its children run: they would hand it results for the old list', async () => {
    await submit(plannerDag());
    const agent = await agentCreate(db, 'worker');
    await completeByKey(agent, 'plan', { files: ['a', 'b'] });
    await settle();
    const [plan] = await rowsOf<{ id: string }>(db, sql`select id from tasks where key = 'plan'`);
    const { taskRerun } = await import('../../../src/engine/dag/rerun.js');
    await expect(taskRerun(db, plan!.id, { downstream: true })).rejects.toThrow(/for_each task review downstream of plan is waiting for its children/);
    expect((await rowsOf<{ status: string }>(db, sql`select status from tasks where key = 'plan'`))[0]!.status).toBe('completed');
  });
});
