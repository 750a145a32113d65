import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, databaseSnapshot, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import { NonRetryableError } from '../../src/runtime/task-errors.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete, taskCompleteMany } from '../../src/engine/attempt/complete.js';
import { taskStart } from '../../src/engine/attempt/lease.js';
import { withTx } from '../../src/db/tx.js';
import { taskSpawn } from '../../src/engine/dag/spawn.js';
import { dlqList, dlqRetry } from '../../src/engine/ops/dlq.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { dagGraphBuild, cycleFind } from '../../src/dag/graph.js';
import { BudgetExceededError, CycleError, InvalidInputError, LeaseLostError } from '../../src/errors.js';
import { taskCancel } from '../../src/engine/dag/cancel.js';

const database = await testDatabase();
const { db } = database;
const { run } = agentRunners(database, { pollIntervalMs: 200 });
const rows = <T>(q: ReturnType<typeof sql>) => rowsOf<T>(db, q);

beforeEach(() => databaseReset(db));

const worker = defineAgent({ name: 'worker', capabilities: ['shell'], maxConcurrent: 4, async run(task) { return { did: task.key, n: task.spec.input.n }; } });

describe('runtime subtasks', () => {
  it('spawn with wait: the attempt ends uncounted, the parent waits, then resumes with its children\'s outputs', async () => {
    const runs: Array<{ attempt: number; children: Record<string, unknown> }> = [];
    await run(defineAgent({
      name: 'planner', capabilities: ['plan'],
      async run(task, ctx) {
        runs.push({ attempt: task.attempt, children: ctx.children });
        const subs = await ctx.spawn([1, 2, 3].map((n) => ({ key: `part-${n}`, template: 'part', spec: { input: { n } } })), { wait: true });
        return { merged: subs.map((s) => s.output) };
      },
    }));
    await run(worker);
    const dagId = await dagCreate(db, `
name: fan-out
spawn:
  templates:
    part: { type: work, spec: { constraints: { capabilities: [shell] } }, accepts: [n] }
tasks:
  plan: { type: plan, spec: { constraints: { capabilities: [plan] } } }
  after: { type: work, depends_on: [plan], spec: { constraints: { capabilities: [shell] }, context: [plan] } }
`);
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    expect(runs).toHaveLength(2);
    expect(runs[0]!.children).toEqual({});
    expect(runs[1]!.children).toEqual({
      'part-1': { did: 'plan/part-1', n: 1 }, 'part-2': { did: 'plan/part-2', n: 2 }, 'part-3': { did: 'plan/part-3', n: 3 },
    });
    const [plan] = await rows<{ attempts: number; output: { merged: unknown[] }; id: string }>(sql`select id, attempts, output from tasks where dag_id = ${dagId} and key = 'plan'`);
    expect(plan!.attempts).toBe(1);
    expect(plan!.output.merged).toEqual([{ did: 'plan/part-1', n: 1 }, { did: 'plan/part-2', n: 2 }, { did: 'plan/part-3', n: 3 }]);
    const outcomes = await rows<{ outcome: string }>(sql`select outcome from attempts where task_id = ${plan!.id} order by ended_at`);
    expect(outcomes.map((o) => o.outcome)).toEqual(['waiting', 'completed']);
    const kids = await rows<{ parent_id: string }>(sql`select parent_id from tasks where dag_id = ${dagId} and key like 'plan/%'`);
    expect(kids.map((k) => k.parent_id)).toEqual([plan!.id, plan!.id, plan!.id]);
    expect((await dagGet(db, dagId))!.tasksTotal).toBe(5);
  });

  it('fire and forget: the parent completes at once, the DAG only when the subtasks have too', async () => {
    await run(defineAgent({
      name: 'launcher', capabilities: ['plan'],
      async run(_t, ctx) { const c = await ctx.spawn([{ key: 'side', template: 'work' }]); return { spawned: c.map((x) => x.key) }; },
    }));
    const dagId = await dagCreate(db, 'name: ff\nspawn: { templates: { work: { type: work, spec: { constraints: { capabilities: [shell] } } } } }\ntasks:\n  go: { type: plan, spec: { constraints: { capabilities: [plan] } } }\n');
    await eventually('parent completed', async () => (await taskStatusByKey(db, dagId)).go === 'completed');
    expect(await taskStatusByKey(db, dagId)).toEqual({ go: 'completed', 'go/side': 'ready' });
    expect((await dagGet(db, dagId))!.status).toBe('running');
    await run(worker);
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
  });

  it('refuses a spawn that would close a cycle, naming the path, and writes nothing', async () => {
    await dagCreate(db, 'name: loop\ntasks:\n  root: { type: t }\n  report: { type: t, depends_on: [root] }\n');
    await agentCreate(db, 'sp-1');
    const [root] = await taskClaim(db, 'sp-1');
    await taskStart(db, { taskId: root!.id, fence: root!.fence });
    const before = await databaseSnapshot(db);
    const err = await taskSpawn(db, { taskId: root!.id, fence: root!.fence }, [{ key: 'x', type: 't', depends_on: ['report'] }], { wait: true })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CycleError);
    expect((err as CycleError).message).toMatch(/spawn from root: dependency cycle: /);
    expect(new Set((err as CycleError).cycle)).toEqual(new Set(['root', 'report', 'root/x']));
    expect(await databaseSnapshot(db)).toBe(before);
  });

  it('rejects invalid subtask specs and stale fencing tokens, writing nothing', async () => {
    await dagCreate(db, 'name: bad\ntasks:\n  root: { type: t }\n');
    await agentCreate(db, 'sp-2');
    const [root] = await taskClaim(db, 'sp-2');
    const ref = { taskId: root!.id, fence: root!.fence };
    const before = await databaseSnapshot(db);
    await expect(taskSpawn(db, ref, [{ key: 'Bad Key', type: 't' }])).rejects.toThrow(/subtasks\[0\]\.key: must match/);
    await expect(taskSpawn(db, ref, [{ key: 'a', type: 't', depends_on: ['nowhere'] }])).rejects.toThrow(InvalidInputError);
    await expect(taskSpawn(db, ref, [{ key: 'a', type: 't', spec: { context: ['root'] } }])).rejects.toThrow(/context ref root names root, which is neither completed nor upstream/);
    await expect(taskSpawn(db, { ...ref, fence: ref.fence + 1 }, [{ key: 'a', type: 't' }])).rejects.toThrow(LeaseLostError);
    expect(await databaseSnapshot(db)).toBe(before);
  });

  it('refuses to make a subtask wait for a cancelled task, and a DAG over its budget gets no more subtasks', async () => {
    const dagId = await dagCreate(db, 'name: gone\nbudget_usd: 1\ntasks:\n  root: { type: t }\n  dropped: { type: t, depends_on: [root] }\n');
    await agentCreate(db, 'sp-3');
    const [root] = await taskClaim(db, 'sp-3', { dagId });
    const ref = { taskId: root!.id, fence: root!.fence };
    const dropped = (await rows<{ id: string }>(sql`select id from tasks where dag_id = ${dagId} and key = 'dropped'`))[0]!;
    await taskCancel(db, dropped.id);
    await expect(taskSpawn(db, ref, [{ key: 'x', type: 't', depends_on: ['dropped'] }])).rejects.toThrow(/depends_on dropped, which is cancelled/);
    await db.execute(sql`update dags set spent_usd = 1 where id = ${dagId}`);
    await expect(taskSpawn(db, ref, [{ key: 'x', type: 't' }])).rejects.toThrow(BudgetExceededError);
  });

  it('a dead-lettered child keeps its waiting parent blocked, and the DLQ says why; a DLQ retry lets it flow on', async () => {
    let fail = true;
    await run(defineAgent({
      name: 'parent', capabilities: ['plan'],
      async run(_t, ctx) { const c = await ctx.spawn([{ key: 'fragile', template: 'work' }], { wait: true }); return c[0]!.output; },
    }));
    await run(defineAgent({
      name: 'flaky', capabilities: ['shell'],
      async run() { if (fail) throw new NonRetryableError('disk full'); return 'fixed'; },
    }));
    const dagId = await dagCreate(db, 'name: blocked\nspawn: { templates: { work: { type: work, spec: { constraints: { capabilities: [shell] } } } } }\ntasks:\n  top: { type: plan, spec: { constraints: { capabilities: [plan] } } }\n');
    await eventually('DAG blocked', async () => (await dagGet(db, dagId))?.status === 'blocked');
    expect(await taskStatusByKey(db, dagId)).toEqual({ top: 'pending', 'top/fragile': 'dead_lettered' });
    expect((await dagGet(db, dagId))!.blockedReason).toMatch(/top\/fragile dead-lettered: non-retryable fatal error/);
    const [entry] = await dlqList(db, {});
    fail = false;
    await dlqRetry(db, entry!.id, {});
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    const [top] = await rows<{ output: unknown }>(sql`select output from tasks where dag_id = ${dagId} and key = 'top'`);
    expect(top!.output).toBe('fixed');
  });

  it('10 agents spawning into one DAG at once, with dependencies on each other\'s subtasks: it stays acyclic and completes', async () => {
    let refused = 0;
    const spawner = defineAgent({
      name: 'ring', capabilities: [],
      async run(task, ctx) {
        if (task.type === 'child') return { child: task.key };
        const i = Number(task.key.slice(1));
        const next = `p${(i + 1) % 10}/c`;
        try {
          await ctx.spawn([{ key: 'c', type: 'child', depends_on: [next] }], { wait: true });
        } catch (e) {
          if (!(e instanceof CycleError) && !(e instanceof InvalidInputError)) throw e;
          if (e instanceof CycleError) refused++;
          await ctx.spawn([{ key: 'c', type: 'child' }], { wait: true });
        }
        return ctx.children;
      },
    });
    const dagId = await dagCreate(db, `name: ring\ntasks:\n${Array.from({ length: 10 }, (_, i) => `  p${i}: { type: root }`).join('\n')}\n`);
    await Promise.all(Array.from({ length: 10 }, (_, i) => run(spawner, { id: `ring-${i}` })));
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed', 30_000);
    const edges = await rows<{ u: string; d: string }>(sql`
      select tu.key as u, td.key as d from edges e join tasks tu on tu.id = e.upstream_id join tasks td on td.id = e.downstream_id where e.dag_id = ${dagId}`);
    const keys = (await rows<{ key: string }>(sql`select key from tasks where dag_id = ${dagId}`)).map((r) => r.key);
    expect(keys).toHaveLength(20);
    expect(cycleFind(dagGraphBuild(keys, edges.map((e) => [e.u, e.d] as const)))).toBeUndefined();
    // Every child feeds its parent; how many ring edges landed depends on timing, but never all ten.
    expect(edges.filter((e) => e.d.startsWith('p') && !e.d.includes('/')).length).toBe(10);
    expect(edges.filter((e) => e.d.includes('/')).length).toBeLessThan(10);
    expect(refused).toBeLessThanOrEqual(1);
    const statuses = await taskStatusByKey(db, dagId);
    expect(Object.values(statuses).every((s) => s === 'completed')).toBe(true);
  });
});

describe('completion racing edge insertion', () => {
  it('a dependency added while its upstream completes never leaves the dependent waiting for ever', async () => {
    for (let round = 0; round < 15; round++) {
      await databaseReset(db);
      const dagId = await dagCreate(db, 'name: race\ntasks:\n  up: { type: t }\n  parent: { type: t }\n');
      await agentCreate(db, 'race-1');
      const claimed = await taskClaim(db, 'race-1', { limit: 2 });
      const up = claimed.find((t) => t.key === 'up')!;
      const parent = claimed.find((t) => t.key === 'parent')!;
      // The subtask depends on `up`, which completes at the same moment on another connection.
      await Promise.all([
        taskSpawn(db, { taskId: parent.id, fence: parent.fence }, [{ key: 'k', type: 't', depends_on: ['up'] }]),
        taskComplete(db, { taskId: up.id, fence: up.fence, output: 1 }),
      ]);
      expect((await taskStatusByKey(db, dagId))['parent/k']).toBe('ready');
    }
  });

  /**
   * Tasks v, up and parent claimed by `agentId`; another transaction holds v's row, and a batch completion of
   * `order` (v and up) has taken its snapshot and waits on v. `release` lets it go on.
   */
  async function completionHeldOnV(agentId: string, order: Array<'v' | 'up'>) {
    const dagId = await dagCreate(db, 'name: late\ntasks:\n  v: { type: t }\n  up: { type: t }\n  parent: { type: t }\n');
    await agentCreate(db, agentId);
    const byKey = new Map((await taskClaim(db, agentId, { limit: 3 })).map((t) => [t.key, t]));
    let release!: () => void;
    const holding = new Promise<void>((r) => { release = r; });
    let held!: () => void;
    const isHeld = new Promise<void>((r) => { held = r; });
    const holder = withTx(db, async (tx) => {
      await tx.execute(sql`select id from tasks where id = ${byKey.get('v')!.id} for update`);
      held();
      await holding;
    });
    await isHeld;
    const completing = taskCompleteMany(db, order.map((k) => ({ taskId: byKey.get(k)!.id, fence: byKey.get(k)!.fence, output: k })));
    await lockWaiters(1);
    const parent = byKey.get('parent')!;
    return { dagId, byKey, parentRef: { taskId: parent.id, fence: parent.fence }, completing, release: async () => { release(); await holder; } };
  }
  const lockWaiters = (n: number) => eventually(`${n} statements waiting on a row lock`, async () => (await rows<{ n: number }>(sql`
    select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`))[0]!.n === n);

  // The narrow window, made wide: a batch completion of [v, up] takes its snapshot, then waits on v's row
  // while the spawn adds the edge up → k and commits. When it reaches up, the edge is not in its snapshot;
  // up's row tells it that dependents were added late, and it recounts them.
  it('a completion whose snapshot predates the edge still unblocks the new dependent, at once', async () => {
    const r = await completionHeldOnV('race-2', ['v', 'up']);
    await taskSpawn(db, r.parentRef, [{ key: 'k', type: 't', depends_on: ['up'] }]);
    await r.release();
    const done = await r.completing;
    expect(done.completed.sort()).toEqual([r.byKey.get('v')!.id, r.byKey.get('up')!.id].sort());
    expect(await taskStatusByKey(db, r.dagId)).toMatchObject({ up: 'completed', 'parent/k': 'ready' });
    const [k] = await rows<{ deps_remaining: number }>(sql`select deps_remaining from tasks where dag_id = ${r.dagId} and key = 'parent/k'`);
    expect(k!.deps_remaining).toBe(0);
  });

  it('a spawn that finds its upstream mid-completion waits for it, and creates the dependent READY', async () => {
    // This time up comes first: the completion holds up's row while it waits on v, and the spawn waits on up.
    const r = await completionHeldOnV('race-3', ['up', 'v']);
    const spawning = taskSpawn(db, r.parentRef, [{ key: 'k', type: 't', depends_on: ['up'] }]);
    await lockWaiters(2);
    await r.release();
    await r.completing;
    const [child] = (await spawning).children;
    expect(child!.status).toBe('ready');
    expect(await taskStatusByKey(db, r.dagId)).toMatchObject({ up: 'completed', 'parent/k': 'ready' });
  });
});
