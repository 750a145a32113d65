import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, databaseSnapshot, drain, rowsOf, taskStatusByKey } from '../../helpers/factories.js';
import { agentRunners } from '../../helpers/runners.js';
import { eventually } from '../../helpers/wait.js';
import { defineAgent } from '../../../src/runtime/define-agent.js';
import { dagGet } from '../../../src/db/queries/dags.js';
import { dagRerunChanged } from '../../../src/engine/dag/rerun-changed.js';
import { dagCancel } from '../../../src/engine/dag/cancel.js';
import { dagEdgesAdd } from '../../../src/engine/dag/edges.js';
import { taskSpawn } from '../../../src/engine/dag/spawn.js';
import { mapTasksSettle } from '../../../src/engine/dag/map.js';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { ConflictError, DagStateError, InvalidInputError } from '../../../src/errors.js';

const database = await testDatabase();
const { db } = database;
const { run } = agentRunners(database);
beforeEach(() => databaseReset(db));

/** fetch and side are tool work; draft names a model, review requires llm (both LLM tasks); publish is tool work after them. */
const REVIEW = `
name: review
tasks:
  fetch: { type: fetch, spec: { constraints: { capabilities: [tool] } } }
  side: { type: fetch, spec: { constraints: { capabilities: [tool] } } }
  draft:
    type: write
    depends_on: [fetch]
    spec: { prompt: Draft it, context: [fetch], models: [model-a], fallback_models: [model-z], constraints: { capabilities: [llm] } }
  review:
    type: write
    depends_on: [draft]
    spec: { prompt: Review it, context: [draft], constraints: { capabilities: [llm] } }
  publish: { type: publish, depends_on: [review], spec: { context: [review], constraints: { capabilities: [tool] } } }
`;

interface Calls { tool: Record<string, number>; llm: Array<{ dag: string; key: string; model: string | null; prompt?: string; inputs: unknown }> }

/** A tool agent and an LLM agent (any model) that count what they are asked to do. */
async function agentsStart(): Promise<Calls> {
  const calls: Calls = { tool: {}, llm: [] };
  await run(defineAgent({
    name: 'tool', capabilities: ['tool'], maxConcurrent: 4,
    async run(task) {
      calls.tool[task.key] = (calls.tool[task.key] ?? 0) + 1;
      return { tool: task.key, n: calls.tool[task.key] };
    },
  }), { id: 'tool-1' });
  await run(defineAgent({
    name: 'llm', capabilities: ['llm'], models: ['*'], maxConcurrent: 4,
    async run(task, ctx) {
      calls.llm.push({ dag: task.dagId, key: task.key, model: task.model, prompt: task.spec.prompt, inputs: ctx.inputs });
      ctx.reportCost({ usd: 0.1, tokens: { input: 100, output: 20 }, model: task.model ?? 'none' });
      return `${task.key} by ${task.model ?? 'any'}`;
    },
  }), { id: 'llm-1' });
  return calls;
}

const completed = (dagId: string) => eventually(`${dagId} completed`, async () => (await dagGet(db, dagId))?.status === 'completed');

interface TaskLine { key: string; status: string; output: unknown; reused_from: string | null; cost_usd: string; attempts: number; id: string; models: string[] }
const tasksOf = async (dagId: string) => new Map((await rowsOf<TaskLine>(db, sql`
  select key, status, output, reused_from, cost_usd, attempts, id, models from tasks where dag_id = ${dagId}`)).map((t) => [t.key, t]));

describe('re-running a finished DAG with a change, as a new DAG', () => {
  it('--model: the LLM tasks and everything downstream run again on the model; unchanged upstream tasks are carried over, their agent not called', async () => {
    const calls = await agentsStart();
    const first = await dagCreate(db, REVIEW);
    await completed(first);
    const before = await tasksOf(first);
    expect(calls.tool).toEqual({ fetch: 1, side: 1, publish: 1 });

    const r = await dagRerunChanged(db, first, { model: 'model-b' }, { by: 'cli:ana', note: 'cheaper model?' });
    expect(r.rerunOf).toBe(first);
    expect(r.change).toMatchObject({ model: 'model-b', changed: ['draft', 'review'], rerunTasks: 3, reusedTasks: 2, by: 'cli:ana', note: 'cheaper model?' });
    expect([...r.rerun].sort()).toEqual(['draft', 'publish', 'review']);
    expect([...r.reused].sort()).toEqual(['fetch', 'side']);
    await completed(r.dagId);

    // fetch and side were not run again: their agent was called once each, for the first DAG.
    expect(calls.tool).toEqual({ fetch: 1, side: 1, publish: 2 });
    const rerunCalls = calls.llm.filter((c) => c.dag === r.dagId);
    expect(rerunCalls.map((c) => [c.key, c.model])).toEqual([['draft', 'model-b'], ['review', 'model-b']]);
    // draft read the carried output of fetch, as it read it the first time.
    expect(rerunCalls[0]!.inputs).toEqual({ fetch: before.get('fetch')!.output });

    const after = await tasksOf(r.dagId);
    for (const key of ['fetch', 'side']) {
      const t = after.get(key)!;
      expect([t.status, t.output, t.reused_from, Number(t.cost_usd), t.attempts]).toEqual(['completed', before.get(key)!.output, before.get(key)!.id, 0, 0]);
    }
    expect(after.get('draft')!.models).toEqual(['model-b']);
    expect(after.get('review')!.output).toBe('review by model-b');
    expect(after.get('draft')!.reused_from).toBeNull();
    const dag = (await dagGet(db, r.dagId))!;
    expect([dag.rerunOf, dag.name, dag.createdBy, dag.tasksTotal, dag.spentUsd]).toEqual([first, 'review', 'cli:ana', 5, expect.closeTo(0.2, 6)]);
    expect(dag.rerunChange).toMatchObject({ model: 'model-b', rerunTasks: 3, reusedTasks: 2 });
    // The original stays as it was.
    expect(await tasksOf(first)).toEqual(before);
    expect((await dagGet(db, first))!.rerunOf).toBeNull();
  });

  it('--set: one task\'s prompt (it and its downstream run), every LLM task\'s field (text read as YAML), the one-task setting winning', async () => {
    const calls = await agentsStart();
    const first = await dagCreate(db, REVIEW);
    await completed(first);

    const one = await dagRerunChanged(db, first, { set: { 'review.prompt': 'Review it harder' } });
    expect(one.change.changed).toEqual(['review']);
    expect([...one.rerun].sort()).toEqual(['publish', 'review']);
    await completed(one.dagId);
    const asked = calls.llm.filter((c) => c.dag === one.dagId);
    expect(asked.map((c) => [c.key, c.prompt, c.model])).toEqual([['review', 'Review it harder', null]]);

    const all = await dagRerunChanged(db, first, {
      set: { models: 'model-c', 'constraints.max_cost_usd': '0.5', 'draft.prompt': 'Draft it: yes', 'draft.input.tone': '{ formal: true }' }, setFromText: true,
    });
    expect(all.change.set).toEqual([
      { task: null, field: 'models', value: ['model-c'] },
      { task: null, field: 'constraints.max_cost_usd', value: 0.5 },
      { task: 'draft', field: 'prompt', value: 'Draft it: yes' },
      { task: 'draft', field: 'input.tone', value: { formal: true } },
    ]);
    const [draft] = await rowsOf<{ spec: { prompt: string; models: string[]; fallbackModels: string[]; input: unknown }; max_cost_usd: string }>(db, sql`
      select spec, max_cost_usd from tasks where dag_id = ${all.dagId} and key = 'draft'`);
    expect([draft!.spec.prompt, draft!.spec.models, draft!.spec.fallbackModels, draft!.spec.input, Number(draft!.max_cost_usd)])
      .toEqual(['Draft it: yes', ['model-c'], ['model-z'], { tone: { formal: true } }, 0.5]);
    // The tool tasks are not LLM tasks: a field set for every LLM task leaves them be.
    const [fetch] = await rowsOf<{ reused_from: string | null; max_cost_usd: string | null }>(db, sql`
      select reused_from, max_cost_usd from tasks where dag_id = ${all.dagId} and key = 'fetch'`);
    expect(fetch).toEqual({ reused_from: expect.stringMatching(/^tsk_/), max_cost_usd: null });
  });

  it('a rerun of a rerun carries the output of the task that made it; a cancelled DAG runs its unfinished tasks again', async () => {
    await agentCreate(db, 'w', ['tool', 'llm'], undefined, { models: ['*'] });
    const first = await dagCreate(db, REVIEW);
    await drain(db, 'w');
    const second = await dagRerunChanged(db, first, { model: 'model-b' });
    await drain(db, 'w');
    const third = await dagRerunChanged(db, second.dagId, { model: 'model-c' });
    const [firstFetch, thirdFetch] = [(await tasksOf(first)).get('fetch')!, (await tasksOf(third.dagId)).get('fetch')!];
    expect(thirdFetch.reused_from).toBe(firstFetch.id);

    const cancelledDag = await dagCreate(db, REVIEW);
    const [fetch] = await taskClaim(db, 'w', { dagId: cancelledDag });
    await taskComplete(db, { taskId: fetch!.id, fence: fetch!.fence, output: { got: 1 } });
    await dagCancel(db, cancelledDag);
    expect((await dagGet(db, cancelledDag))!.status).toBe('cancelled');
    const again = await dagRerunChanged(db, cancelledDag, { set: { 'draft.prompt': 'Draft it again' } });
    // side was cancelled before it ran: it runs too, though nothing changed in it.
    expect([...again.reused]).toEqual(['fetch']);
    expect(await taskStatusByKey(db, again.dagId)).toEqual({ fetch: 'completed', side: 'ready', draft: 'ready', review: 'pending', publish: 'pending' });
    expect((await dagGet(db, again.dagId))!.tasksOpen).toBe(4);
  });

  it('a for_each task is carried whole (its children are not copied); a task waiting on another task\'s spawned subtask is refused', async () => {
    await agentCreate(db, 'w', ['tool', 'llm'], undefined, { models: ['*'] });
    const mapped = await dagCreate(db, `
name: mapped
tasks:
  each: { type: fetch, for_each: [1, 2], spec: { constraints: { capabilities: [tool] } } }
  sum: { type: write, depends_on: [each], spec: { context: [each], models: [model-a] } }
`);
    await mapTasksSettle(db, { batch: 10 });
    await drain(db, 'w', (k) => `out ${k}`);
    await mapTasksSettle(db, { batch: 10 });
    await drain(db, 'w', (k) => `out ${k}`);
    expect((await dagGet(db, mapped))!.status).toBe('completed');
    const r = await dagRerunChanged(db, mapped, { model: 'model-b' });
    expect(await taskStatusByKey(db, r.dagId)).toEqual({ each: 'completed', sum: 'ready' });
    expect((await tasksOf(r.dagId)).get('each')!.output).toEqual(['out each/0', 'out each/1']);

    const spawned = await dagCreate(db, `
name: spawned
tasks:
  a: { type: fetch, spec: { constraints: { capabilities: [tool] } } }
  b: { type: write, depends_on: [a], spec: { models: [model-a] } }
`);
    const [a] = await taskClaim(db, 'w', { dagId: spawned });
    await taskSpawn(db, { taskId: a!.id, fence: a!.fence }, [{ key: 'extra', type: 'fetch' }]);
    await dagEdgesAdd(db, spawned, [{ upstream: 'a/extra', downstream: 'b' }]);
    await taskComplete(db, { taskId: a!.id, fence: a!.fence, output: 'a' });
    await drain(db, 'w');
    expect((await dagGet(db, spawned))!.status).toBe('completed');
    const before = await databaseSnapshot(db);
    await expect(dagRerunChanged(db, spawned, { model: 'model-b' })).rejects.toThrow(ConflictError);
    await expect(dagRerunChanged(db, spawned, { model: 'model-b' })).rejects.toThrow(/task b waits for a\/extra, a subtask a spawned at runtime/);
    expect(await databaseSnapshot(db)).toBe(before);
  });

  it('refuses, writing nothing: an unfinished DAG, no change, a change that changes nothing, a bad model or field, an unknown task', async () => {
    await agentCreate(db, 'w', ['tool', 'llm'], undefined, { models: ['*'] });
    const done = await dagCreate(db, REVIEW);
    const tools = await dagCreate(db, 'name: tools\ntasks:\n  a: { type: fetch, spec: { constraints: { capabilities: [tool] } } }\n');
    await drain(db, 'w');
    const open = await dagCreate(db, REVIEW);
    const before = await databaseSnapshot(db);
    const refusals: Array<[Parameters<typeof dagRerunChanged>[2], string, RegExp]> = [
      [{ model: 'model-b' }, open, /^DAG dag_\w+ is running: only a finished DAG \(completed or cancelled\) is re-run with a change/],
      [{}, done, /^a rerun needs a change/],
      [{ model: 'model a' }, done, /^model: must be a model name/],
      [{ set: { 'draft.promt': 'x' } }, done, /^set draft\.promt: unknown field promt \(did you mean "prompt"\?\)/],
      [{ set: { promt: 'x' } }, done, /^set promt: promt is not a field \(did you mean "prompt"\?\)/],
      [{ set: { 'constraints.max_cost_usd': -1 } }, done, /^set constraints\.max_cost_usd: Too small/],
      [{ set: { 'constraints.max_cost': 1 } }, done, /unknown constraint max_cost \(did you mean "max_cost_usd"\?\)/],
      [{ set: { 'draft.context': ['fetch'] } }, done, /context wires a task to its upstream tasks/],
      [{ set: { models: 'model a' }, setFromText: true }, done, /^set models: \[0\] must be a model name/],
      [{ set: { 'drat.prompt': 'x' } }, done, /^set drat\.prompt: the DAG has no task drat \(did you mean "draft"\?\)/],
      [{ set: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`input.f${i}`, i])) }, done, /^set: 101 fields; at most 100 in one rerun/],
      // Its one task names no model and needs no llm: not an LLM task, so --model changes nothing.
      [{ model: 'model-b' }, tools, /^nothing would change: no task's spec differs/],
      // The same model and no fallbacks: the same specs.
      [{ set: { 'draft.prompt': 'Draft it' } }, done, /^nothing would change/],
    ];
    for (const [change, dagId, message] of refusals) {
      const err = await dagRerunChanged(db, dagId, change).then(() => undefined, (e: Error) => e);
      expect(err, JSON.stringify(change)).toBeInstanceOf(dagId === open ? DagStateError : InvalidInputError);
      expect(err!.message, JSON.stringify(change)).toMatch(message);
    }
    expect(await databaseSnapshot(db)).toBe(before);
  });
});
