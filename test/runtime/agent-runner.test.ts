import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { chainYaml, dagCreate, databaseReset, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import { AuthFailureError, RateLimitError } from '../../src/runtime/task-errors.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { agentGet } from '../../src/db/queries/agents.js';

const database = await testDatabase();
const { db } = database;
const { runner } = agentRunners(database);
const rows = <T>(q: ReturnType<typeof sql>) => rowsOf<T>(db, q);

beforeEach(() => databaseReset(db));

describe('agent runner', () => {
  it('runs a DAG to completion, handing each task its upstream inputs and charging reported cost', async () => {
    const seen: Record<string, unknown> = {};
    const r = runner(defineAgent({
      name: 'echo', capabilities: ['llm'], budgetUsd: 10, maxConcurrent: 2,
      async run(task, ctx) {
        seen[task.key] = ctx.inputs;
        ctx.reportCost({ usd: 0.25, tokens: { input: 100, output: 10 }, model: 'm1' });
        await ctx.heartbeat({ progress: 0.5, message: 'half' });
        return { key: task.key };
      },
    }), { id: 'echo-1' });
    const dagId = await dagCreate(db, `
name: pair
tasks:
  a: { type: t, spec: { constraints: { capabilities: [llm] } } }
  b: { type: t, depends_on: [a], spec: { context: [a] } }
`);
    await r.start();
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    expect(seen).toEqual({ a: {}, b: { a: { key: 'a' } } });
    expect((await dagGet(db, dagId))!.spentUsd).toBeCloseTo(0.5);
    expect((await agentGet(db, 'echo-1'))!.spentUsd).toBeCloseTo(0.5);
    const attempts = await rows<{ outcome: string; tokens_in: string; model: string }>(sql`select outcome, tokens_in, model from attempts where dag_id = ${dagId}`);
    expect(attempts).toHaveLength(2);
    expect(attempts.every((a) => a.outcome === 'completed' && Number(a.tokens_in) === 100 && a.model === 'm1')).toBe(true);
  });

  it('an idle agent is woken only by READY work it may take: a hint for another agent\'s capability costs it no claim', async () => {
    const { AgentFleet } = await import('../../src/runtime/fleet.js');
    const { engineEvents } = await import('../../src/observability/engine-events.js');
    const { pino } = await import('pino');
    const claims = new Map<string, number>();
    const count = (e: { agentId: string }) => claims.set(e.agentId, (claims.get(e.agentId) ?? 0) + 1);
    engineEvents.on('claim', count);
    const fleet = new AgentFleet(database, [
      { def: defineAgent({ name: 'alpha', capabilities: ['alpha'], run: async () => 'a' }), id: 'wake-alpha' },
      { def: defineAgent({ name: 'beta', capabilities: ['beta'], run: async () => 'b' }), id: 'wake-beta' },
    ], { log: pino({ level: 'silent' }), pollIntervalMs: 30_000 });
    try {
      await fleet.start();
      await eventually('both claimed once and wait', async () => claims.get('wake-alpha') === 1 && claims.get('wake-beta') === 1);
      const dagId = await dagCreate(db, 'name: for-alpha\ntasks:\n  x: { type: t, spec: { constraints: { capabilities: [alpha] } } }\n');
      await eventually('alpha ran it', async () => (await taskStatusByKey(db, dagId)).x === 'completed');
      expect(claims.get('wake-beta')).toBe(1);
    } finally {
      engineEvents.off('claim', count);
      await fleet.stop(0);
    }
  });

  it('wakes an idle agent by NOTIFY: a new task starts long before the 30 s poll could have found it', async () => {
    let claims = 0;
    const r = runner(defineAgent({ name: 'idle', capabilities: [], async run() { claims++; return 'ok'; } }), { pollIntervalMs: 30_000 });
    const { engineEvents } = await import('../../src/observability/engine-events.js');
    let claimStatements = 0;
    const counted = () => { claimStatements++; };
    engineEvents.on('claim', counted);
    await r.start();
    // The loop's first claim found nothing; it now waits on the 30 s poll or a notification.
    await eventually('the first claim', async () => claimStatements > 0).finally(() => engineEvents.off('claim', counted));
    const submitted = Date.now();
    const dagId = await dagCreate(db, 'name: one\ntasks:\n  only: { type: t }\n');
    await eventually('task completed', async () => (await taskStatusByKey(db, dagId)).only === 'completed', 10_000);
    const elapsed = Date.now() - submitted;
    const [t] = await rows<{ lag: number }>(sql`select extract(epoch from started_at - ready_at)::float8 * 1000 as lag from tasks where dag_id = ${dagId}`);
    expect(claims).toBe(1);
    expect(elapsed).toBeLessThan(30_000 * 0.8); // earlier than the first poll could have happened
    expect(t!.lag).toBeLessThan(1000);
  });

  it('a chain stays on the agent that completes each link (the completion hands it the next), while another agent idles', async () => {
    const def = (name: string) => defineAgent({ name, capabilities: [], async run(task) { return task.key; } });
    const [a, b] = [runner(def('first'), { pollIntervalMs: 30_000 }), runner(def('second'), { pollIntervalMs: 30_000 })];
    await Promise.all([a.start(), b.start()]);
    const dagId = await dagCreate(db, chainYaml('links', 20));
    await eventually('chain completed', async () => (await dagGet(db, dagId))?.status === 'completed', 20_000);
    const byAgent = await rows<{ agent_id: string; n: number }>(sql`select agent_id, count(*)::int as n from attempts where dag_id = ${dagId} group by agent_id`);
    // Woken by each READY task's NOTIFY, the idle agent would take about half of the links.
    expect(byAgent).toHaveLength(1);
    expect(byAgent[0]!.n).toBe(20);
  });

  it('classifies handler errors: rate_limit retries, auth_failure dead-letters at once, anything else is error', async () => {
    const r = runner(defineAgent({
      name: 'faulty', capabilities: [], maxConcurrent: 3,
      async run(task) {
        if (task.key === 'limited') throw new RateLimitError('429 from provider', { retryAfterSec: 1 });
        if (task.key === 'denied') throw new AuthFailureError('401 bad key');
        throw new Error('boom');
      },
    }));
    const dagId = await dagCreate(db, `
name: faults
defaults: { retry: { initial_delay: 1h } }
tasks:
  limited: { type: t }
  denied: { type: t }
  broken: { type: t }
`);
    await r.start();
    await eventually('all three failed once', async () => {
      const s = await taskStatusByKey(db, dagId);
      return s.limited === 'retrying' && s.denied === 'dead_lettered' && s.broken === 'retrying';
    });
    const attempts = await rows<{ key: string; error_class: string }>(sql`
      select t.key, a.error_class from attempts a join tasks t on t.id = a.task_id where a.dag_id = ${dagId} order by t.key`);
    expect(attempts).toEqual([
      { key: 'broken', error_class: 'error' }, { key: 'denied', error_class: 'auth_failure' }, { key: 'limited', error_class: 'rate_limit' },
    ]);
  });

  it('aborts a handler past max_duration_sec and fails the attempt as timeout', async () => {
    let aborted = false;
    const r = runner(defineAgent({
      name: 'slow', capabilities: [],
      run: (_task, ctx) => new Promise((_resolve, reject) => {
        ctx.signal.addEventListener('abort', () => { aborted = true; reject(ctx.signal.reason); });
      }),
    }));
    const dagId = await dagCreate(db, `
name: slow
tasks:
  stuck: { type: t, max_attempts: 1, spec: { constraints: { max_duration_sec: 1 } } }
`);
    await r.start();
    await eventually('timed out', async () => (await taskStatusByKey(db, dagId)).stuck === 'dead_lettered');
    const [a] = await rows<{ error_class: string }>(sql`select error_class from attempts where dag_id = ${dagId}`);
    expect(a!.error_class).toBe('timeout');
    expect(aborted).toBe(true);
  });

  it('is stopped at its budget while it runs, and stops claiming once it is spent', async () => {
    const r = runner(defineAgent({
      name: 'thrifty', capabilities: [], budgetUsd: 1,
      async run(_t, ctx) { await ctx.reportCost({ usd: 0.6 }); return null; },
    }), { id: 'thrifty-1' });
    const dagId = await dagCreate(db, 'name: three\ntasks:\n  a: { type: t }\n  b: { type: t }\n  c: { type: t }\n');
    await r.start();
    // The second task's report takes the agent past its budget: that attempt is stopped (budget_exceeded), and the
    // agent, with nothing left, claims no third.
    await eventually('one completed, one stopped', async () => Object.values(await taskStatusByKey(db, dagId)).sort().join() === 'completed,dead_lettered,ready');
    await r.stop({ graceMs: 1000 });
    expect(Object.values(await taskStatusByKey(db, dagId)).sort()).toEqual(['completed', 'dead_lettered', 'ready']);
    const [stopped] = await rows<{ error_class: string }>(sql`select error_class from attempts where dag_id = ${dagId} and outcome = 'failed'`);
    expect(stopped!.error_class).toBe('budget_exceeded');
    expect((await agentGet(db, 'thrifty-1'))!.spentUsd).toBeCloseTo(1.2);
  });

  it('on stop, lets running tasks finish within the grace period', async () => {
    const r = runner(defineAgent({ name: 'steady', capabilities: [], async run() { await new Promise((res) => setTimeout(res, 300)); return 'done'; } }), { id: 'steady-1' });
    const dagId = await dagCreate(db, 'name: one\ntasks:\n  only: { type: t }\n');
    await r.start();
    await eventually('running', async () => (await taskStatusByKey(db, dagId)).only === 'running');
    await r.stop({ graceMs: 10_000 });
    expect(await taskStatusByKey(db, dagId)).toEqual({ only: 'completed' });
    expect((await agentGet(db, 'steady-1'))!.status).toBe('offline');
  });

  it('an old process stopping does not drain the new process that re-registered the same id', async () => {
    const def = defineAgent({ name: 'rolling', capabilities: [], async run() { return null; } });
    const old = runner(def, { id: 'rolling-1' });
    await old.start();
    const fresh = runner(def, { id: 'rolling-1' });
    await fresh.start();
    await old.stop({ graceMs: 0 });
    expect((await agentGet(db, 'rolling-1'))!.status).toBe('active');
    const dagId = await dagCreate(db, 'name: after-deploy\ntasks:\n  a: { type: t }\n');
    await eventually('completed by the new process', async () => (await taskStatusByKey(db, dagId)).a === 'completed');
  });

  it('on stop past the grace period, releases running tasks without consuming an attempt', async () => {
    const r = runner(defineAgent({ name: 'stubborn', capabilities: [], run: (_t, ctx) => { ctx.reportCost({ usd: 0.3, model: 'm' }); return new Promise(() => {}); } }));
    const dagId = await dagCreate(db, 'name: one\ntasks:\n  only: { type: t }\n');
    await r.start();
    await eventually('running', async () => (await taskStatusByKey(db, dagId)).only === 'running');
    await r.stop({ graceMs: 50 });
    const [t] = await rows<{ status: string; attempts: number }>(sql`select status, attempts from tasks where dag_id = ${dagId}`);
    expect(t).toEqual({ status: 'ready', attempts: 0 });
    const [a] = await rows<{ outcome: string; cost: number; model: string }>(sql`select outcome, cost_usd::float8 as cost, model from attempts where dag_id = ${dagId}`);
    expect(a).toEqual({ outcome: 'released', cost: 0.3, model: 'm' });
    expect((await dagGet(db, dagId))!.spentUsd).toBeCloseTo(0.3);
  });
});
