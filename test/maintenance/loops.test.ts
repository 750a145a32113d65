import { createServer, type Server } from 'node:http';
import { beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, dagSpec, databaseReset, drain, leaseExpire, retryDue, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { taskStart } from '../../src/engine/attempt/lease.js';
import { scheduleRegister } from '../../src/engine/ops/cron.js';
import { rateLimitSet } from '../../src/engine/ops/rate-limits.js';
import { webhookAdd } from '../../src/webhooks/webhooks.js';
import { effectivePriority } from '../../src/model/priority.js';
import { LOOP_NAMES } from '../../src/maintenance/index.js';
import type { LoopIdentity } from '../../src/maintenance/service.js';
import { REAPER_LOOP, reaperCreate } from '../../src/maintenance/reaper.js';
import { PROMOTER_LOOP, promoterCreate } from '../../src/maintenance/promoter.js';
import { SCHEDULER_LOOP, schedulerCreate } from '../../src/maintenance/scheduler.js';
import { DEPS_RECONCILER_LOOP, depsReconcilerCreate } from '../../src/maintenance/deps-reconciler.js';
import { PRIORITY_REFRESHER_LOOP, priorityRefresherCreate } from '../../src/maintenance/priority-refresher.js';
import { DURATION_LEARNER_LOOP, durationLearnerCreate } from '../../src/maintenance/duration-learner.js';
import { WEBHOOK_DISPATCHER_LOOP, webhookDispatcherCreate } from '../../src/maintenance/webhook-dispatcher.js';
import { BUDGET_WATCH_LOOP, budgetWatchCreate } from '../../src/maintenance/budget-watch.js';
import { WAITS_LOOP, waitsCreate } from '../../src/maintenance/waits-and-maps.js';
import { RATE_USAGE_LOOP, rateUsageCreate } from '../../src/maintenance/rate-usage.js';
import { TENANT_SHARE_LOOP, tenantShareCreate } from '../../src/maintenance/tenant-share.js';
import { tenantCreate } from '../../src/engine/ops/tenants.js';
import { RETENTION_LOOP, retentionLoopCreate } from '../../src/maintenance/retention.js';
import { WORKSPACE_RECLAIMER_LOOP, workspaceReclaimerCreate } from '../../src/maintenance/workspace-reclaimer.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { dagSourceLoad } from '../../src/dag/load.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { workspaceOpen } from '../../src/workspaces/workspace.js';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { repoMake, scratchDir } from '../helpers/git-repos.js';

/**
 * One home for the maintenance loops: for each loop the registry lists, the situation its one job is for, one
 * `runOnce()` (never `start()`, never a sleep: time moves by timestamps written into the past, or by the loop's own
 * clock), what it says it handled, the rows it changed, the rows next to them it left alone, and a second pass
 * that finds nothing left. Each test starts from an empty database: a loop acts on every row, not on one DAG's.
 */

const { db } = await testDatabase();
beforeEach(() => databaseReset(db));
/** Repositories and a workspace root for the workspace reclaimer's test. */
const scratch = scratchDir();

const rows = <T>(q: ReturnType<typeof sql>) => rowsOf<T>(db, q);
const idOf = async (dagId: string, key: string) => (await rows<{ id: string }>(sql`select id from tasks where dag_id = ${dagId} and key = ${key}`))[0]!.id;

/** The loops this file tests, named when the tests are collected (so a filtered run still counts them all). */
const tested: string[] = [];
function loopTest(loop: LoopIdentity, situation: string, body: () => Promise<void>): void {
  tested.push(loop.name);
  it(`${loop.name}: ${situation}`, body);
}

describe('maintenance loops, one runOnce each', () => {
  loopTest(REAPER_LOOP, 'a running task whose heartbeat lease expired is taken back as a crash; a live lease is left alone', async () => {
    // Priorities only fix which agent claims which task.
    const dagId = await dagCreate(db, 'name: reap\ntasks:\n  quiet: { type: t, priority: 10, retry: { strategy: immediate } }\n  alive: { type: t, priority: 20 }\n');
    // Claimed, then started: a sign of life. (A claim with `start: true` writes claimed_at and heartbeat_at from two
    // clock_timestamp() calls, equal about a quarter of the time, and the reaper then takes the task for one never
    // started: handed back with no attempt spent, not a crash.)
    const [quiet] = await taskClaim(db, await agentCreate(db, 'gone-quiet'));
    const [alive] = await taskClaim(db, await agentCreate(db, 'still-here'));
    expect([quiet!.key, alive!.key]).toEqual(['quiet', 'alive']);
    for (const t of [quiet!, alive!]) await taskStart(db, { taskId: t.id, fence: t.fence });
    await leaseExpire(db, quiet!.id);

    const reaper = reaperCreate({ db });
    expect(await reaper.runOnce()).toBe(1);
    expect(await taskStatusByKey(db, dagId)).toEqual({ quiet: 'ready', alive: 'running' });
    expect(await rows(sql`select task_id, agent_id, outcome, error_class from attempts`)).toEqual([
      { task_id: quiet!.id, agent_id: 'gone-quiet', outcome: 'failed', error_class: 'crash' },
    ]);
    expect(await rows(sql`select task_id, data->>'reason' as reason from events where type = 'task.reaped'`)).toEqual([{ task_id: quiet!.id, reason: 'heartbeat' }]);
    expect(await rows(sql`select claimed_by, fence from tasks where id = ${alive!.id}`)).toEqual([{ claimed_by: 'still-here', fence: alive!.fence }]);

    expect(await reaper.runOnce()).toBe(0);
  });

  loopTest(PROMOTER_LOOP, 'a retry whose backoff elapsed and a not_before that passed move to READY; a retry not yet due stays RETRYING', async () => {
    const dagId = await dagCreate(db, `name: promote
tasks:
  due: { type: t, retry: { strategy: exponential, initial_delay: 10s, jitter: 0 } }
  waiting: { type: t, retry: { strategy: exponential, initial_delay: 10s, jitter: 0 } }
  later: { type: t, not_before: 1h }
`);
    for (const t of await taskClaim(db, await agentCreate(db, 'failer'), { limit: 2, start: true })) {
      await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'provider_error', message: 'upstream 502' });
    }
    expect(await taskStatusByKey(db, dagId)).toEqual({ due: 'retrying', waiting: 'retrying', later: 'pending' });
    await retryDue(db, await idOf(dagId, 'due'));
    await db.execute(sql`update tasks set run_at = now() - interval '1 second' where dag_id = ${dagId} and key = 'later'`);

    const promoter = promoterCreate({ db });
    expect(await promoter.runOnce()).toBe(2);
    expect(await taskStatusByKey(db, dagId)).toEqual({ due: 'ready', waiting: 'retrying', later: 'ready' });
    expect(await rows(sql`select key from tasks where dag_id = ${dagId} and status = 'ready' and ready_at is not null order by key`)).toEqual([{ key: 'due' }, { key: 'later' }]);

    expect(await promoter.runOnce()).toBe(0);
  });

  loopTest(SCHEDULER_LOOP, 'a cron schedule whose fire time came creates its DAG once and moves on; a schedule not due fires nothing', async () => {
    let now = new Date('2026-11-23T10:00:30Z');
    const clock = async () => now;
    const scheduled = (name: string, cron: string) =>
      `name: ${name}\nparams:\n  scheduled_at: { default: "" }\ntasks:\n  work: { type: t, spec: { input: { for: "\${params.scheduled_at}" } } }\nschedule:\n  cron: "${cron}"\n`;
    for (const [name, cron] of [['every-minute', '* * * * *'], ['mondays', '0 9 * * MON']] as const) {
      const yaml = scheduled(name, cron);
      await scheduleRegister(db, await dagSpec(yaml), yaml, clock);
    }
    now = new Date('2026-11-23T10:01:00.400Z');

    const scheduler = schedulerCreate({ db, clock });
    expect(await scheduler.runOnce()).toBe(1);
    expect(await rows(sql`select created_by, idempotency_key, params from dags`)).toEqual([
      { created_by: 'cron:every-minute', idempotency_key: 'cron:every-minute:2026-11-23T10:01:00.000Z', params: { scheduled_at: '2026-11-23T10:01:00.000Z' } },
    ]);
    expect(await rows(sql`select name, fires, to_char(next_fire_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as next from schedules order by name`)).toEqual([
      { name: 'every-minute', fires: 1, next: '2026-11-23T10:02:00Z' },
      { name: 'mondays', fires: 0, next: '2026-11-30T09:00:00Z' },
    ]);

    expect(await scheduler.runOnce()).toBe(0);
    expect(await rows(sql`select id from dags`)).toHaveLength(1);
  });

  loopTest(DEPS_RECONCILER_LOOP, 'a PENDING task whose dependency counter drifted is recounted and becomes READY; a correct counter is left alone', async () => {
    const drifted = await dagCreate(db, 'name: drifted\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');
    // b's counter one too high, as a process dying between an edge insert and its recount would leave it.
    await db.execute(sql`update tasks set deps_remaining = 2 where dag_id = ${drifted} and key = 'b'`);
    await drain(db, await agentCreate(db, 'worker'));
    const correct = await dagCreate(db, 'name: correct\ntasks:\n  x: { type: t }\n  y: { type: t, depends_on: [x] }\n');
    // Past the quiet period: nothing is mid-update.
    await db.execute(sql`update tasks set updated_at = now() - interval '1 minute'`);
    expect(await taskStatusByKey(db, drifted)).toEqual({ a: 'completed', b: 'pending' });

    const reconciler = depsReconcilerCreate({ db });
    expect(await reconciler.runOnce()).toBe(1);
    expect(await taskStatusByKey(db, drifted)).toEqual({ a: 'completed', b: 'ready' });
    expect(await rows(sql`select deps_remaining from tasks where dag_id = ${drifted} and key = 'b'`)).toEqual([{ deps_remaining: 0 }]);
    expect(await taskStatusByKey(db, correct)).toEqual({ x: 'ready', y: 'pending' });
    expect(await rows(sql`select task_id from events where type = 'task.deps_repaired'`)).toEqual([{ task_id: await idOf(drifted, 'b') }]);

    expect(await reconciler.runOnce()).toBe(0);
  });

  loopTest(PRIORITY_REFRESHER_LOOP, 'a READY task that aged 30 minutes gets its stored effective priority recomputed; one that does not age is left alone', async () => {
    const dagId = await dagCreate(db, 'name: aging\ntasks:\n  aging: { type: t, boost_per_minute: 1 }\n  steady: { type: t, boost_per_minute: 0 }\n');
    const stored = async () => Object.fromEntries((await rows<{ key: string; p: number }>(sql`
      select key, effective_priority::float8 as p from tasks where dag_id = ${dagId}`)).map((r) => [r.key, r.p]));
    const before = await stored();
    const [aging] = await rows<{ readyMs: number; rank: number }>(sql`
      select extract(epoch from ready_at)::float8 * 1000 as "readyMs", cp_rank_sec::float8 as rank from tasks where dag_id = ${dagId} and key = 'aging'`);
    // The loop's clock, 30 minutes after the task became READY: 1 point a minute, 30 points more urgent.
    const at = new Date(aging!.readyMs + 30 * 60_000);
    const refresher = priorityRefresherCreate({ db, now: () => at });

    expect(await refresher.runOnce()).toBe(1);
    const after = await stored();
    const readySec = (at.getTime() - aging!.readyMs) / 1000;
    expect(after.aging).toBeCloseTo(effectivePriority({ priority: 50, boostPerMinute: 1, readySec, deadlineInSec: null, cpRankSec: aging!.rank }), 4);
    expect(before.aging! - after.aging!).toBeCloseTo(30, 1);
    expect(after.steady).toBe(before.steady);

    expect(await refresher.runOnce()).toBe(0);
  });

  loopTest(DURATION_LEARNER_LOOP, 'completed attempts of the last day teach their type\'s median run time; an older attempt teaches nothing', async () => {
    const dagId = await dagCreate(db, 'name: learn\ntasks:\n  b1: { type: build }\n  b2: { type: build }\n  b3: { type: build }\n  old: { type: lint }\n');
    await drain(db, await agentCreate(db, 'worker'));
    await db.execute(sql`update attempts a set duration_ms = d.ms from tasks t, (values ('b1', 2000), ('b2', 4000), ('b3', 9000), ('old', 1000)) as d(key, ms)
      where t.id = a.task_id and t.dag_id = ${dagId} and t.key = d.key`);
    await db.execute(sql`update attempts a set ended_at = now() - interval '2 days' from tasks t where t.id = a.task_id and t.key = 'old'`);

    const learner = durationLearnerCreate({ db });
    expect(await learner.runOnce()).toBe(1);
    const learned = () => rows(sql`select type, median_sec, samples from task_type_durations`);
    expect(await learned()).toEqual([{ type: 'build', median_sec: 4, samples: 3 }]);

    // Not "nothing handled": the learner re-derives every type with attempts in the last day on each pass and
    // counts what it wrote, so a second pass reports the type again. What it writes is the same.
    expect(await learner.runOnce()).toBe(1);
    expect(await learned()).toEqual([{ type: 'build', median_sec: 4, samples: 3 }]);
  });

  loopTest(WEBHOOK_DISPATCHER_LOOP, 'a due delivery is POSTed to its receiver and recorded delivered; a delivery whose retry is not due is not sent', async () => {
    const received: Array<{ delivery: string; body: { type: string; dag_id: string } }> = [];
    const server: Server = createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => { received.push({ delivery: String(req.headers['dagent-delivery']), body: JSON.parse(raw) }); res.writeHead(200).end(); });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    onTestFinished(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));
    // Loopback: reached only because the operator allows it.
    const allowHosts = ['127.0.0.1'];
    const hook = await webhookAdd(db, { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, events: ['dag.completed'], allowHosts });
    const dagId = await dagCreate(db, 'name: hooked\ntasks:\n  only: { type: t }\n');
    await drain(db, await agentCreate(db, 'worker'));
    // A delivery of an earlier event whose retry comes in an hour.
    await db.execute(sql`insert into webhook_deliveries (webhook_id, event_id, event_type, payload, attempts, next_attempt_at)
      values (${hook.id}, 0, 'dag.completed', '{}', 1, now() + interval '1 hour')`);
    const [due] = await rows<{ id: string }>(sql`select id from webhook_deliveries where status = 'pending' and next_attempt_at <= now()`);

    const dispatcher = webhookDispatcherCreate({ db, allowHosts, timeoutSec: 5 });
    expect(await dispatcher.runOnce()).toBe(1);
    expect(received).toEqual([{ delivery: String(due!.id), body: expect.objectContaining({ type: 'dag.completed', dag_id: dagId }) }]);
    expect(await rows(sql`select event_id::int as event, status, attempts, last_status from webhook_deliveries order by event_id`)).toEqual([
      { event: 0, status: 'pending', attempts: 1, last_status: null },
      { event: expect.any(Number), status: 'delivered', attempts: 1, last_status: 200 },
    ]);

    expect(await dispatcher.runOnce()).toBe(0);
    expect(received).toHaveLength(1);
  });

  loopTest(BUDGET_WATCH_LOOP, 'a DAG whose budget cannot pay for its READY task is marked blocked with its reason; one that can pay keeps running', async () => {
    const broke = await dagCreate(db, 'name: broke\nbudget_usd: 0.5\ntasks:\n  a: { type: t, spec: { constraints: { max_cost_usd: 1 } } }\n');
    const funded = await dagCreate(db, 'name: funded\nbudget_usd: 5\ntasks:\n  a: { type: t, spec: { constraints: { max_cost_usd: 1 } } }\n');
    const reason = 'budget: $0.5000 left of $0.5000, task a may cost $1.0000';

    const watch = budgetWatchCreate({ db });
    expect(await watch.runOnce()).toBe(1);
    expect(await rows(sql`select id, status, blocked_reason from dags order by name`)).toEqual([
      { id: broke, status: 'blocked', blocked_reason: reason },
      { id: funded, status: 'running', blocked_reason: null },
    ]);
    expect(await rows(sql`select dag_id, data from events where type = 'dag.blocked'`)).toEqual([{ dag_id: broke, data: { reason: 'budget', message: reason } }]);

    expect(await watch.runOnce()).toBe(0);
  });

  loopTest(WAITS_LOOP, 'a wait for a signal whose timeout lapsed fails with class timeout and is dead-lettered; a wait within its timeout goes on waiting', async () => {
    const gate = (name: string, timeout: string) => `name: ${name}\ntasks:\n  build: { type: w }\n  gate: { type: gate, depends_on: [build], wait_for: { signal: "deploy:${name}", timeout: ${timeout} } }\n`;
    const lapsed = await dagCreate(db, gate('lapsed', '90s'));
    const patient = await dagCreate(db, gate('patient', '1h'));
    expect((await drain(db, await agentCreate(db, 'builder'))).sort()).toEqual(['build', 'build']);
    const gateId = await idOf(lapsed, 'gate');
    await leaseExpire(db, gateId);

    const waits = waitsCreate({ db });
    expect(await waits.runOnce()).toBe(1);
    expect(await taskStatusByKey(db, lapsed)).toEqual({ build: 'completed', gate: 'dead_lettered' });
    expect(await taskStatusByKey(db, patient)).toEqual({ build: 'completed', gate: 'waiting' });
    expect(await rows(sql`select outcome, error_class, error_message from attempts where task_id = ${gateId}`)).toEqual([
      { outcome: 'failed', error_class: 'timeout', error_message: 'no signal deploy:lapsed within 90s' },
    ]);
    expect(await rows(sql`select d.status, l.error_class from dead_letters l join dags d on d.id = l.dag_id`)).toEqual([{ status: 'blocked', error_class: 'timeout' }]);

    expect(await waits.runOnce()).toBe(0);
  });

  loopTest(RATE_USAGE_LOOP, 'usage rows older than the longest window (an hour) are pruned; a recent one still counts and stays', async () => {
    await rateLimitSet(db, 'acme/m', { requests: 10, per: '1m' });
    await dagCreate(db, 'name: metered\ntasks:\n  t0: { type: w, spec: { models: [acme/m] } }\n  t1: { type: w, spec: { models: [acme/m] } }\n  t2: { type: w, spec: { models: [acme/m] } }\n');
    const claimed = await taskClaim(db, await agentCreate(db, 'w', [], undefined, { models: ['acme/m'] }), { limit: 3 });
    expect(await rows(sql`select key from rate_usage`)).toHaveLength(3);
    const kept = claimed[0]!.id;
    await db.execute(sql`update rate_usage set at = at - interval '3601 seconds' where task_id <> ${kept}`);

    const loop = rateUsageCreate({ db });
    expect(await loop.runOnce()).toBe(2);
    expect(await rows(sql`select task_id, key from rate_usage`)).toEqual([{ task_id: kept, key: 'acme/m' }]);

    expect(await loop.runOnce()).toBe(0);
  });

  loopTest(TENANT_SHARE_LOOP, 'what claims served each tenant is folded into its virtual time; a tenant with nothing READY is brought up to the lowest of those with work', async () => {
    await tenantCreate(db, { id: 'busy', weight: 2 });
    await tenantCreate(db, { id: 'idle' });
    await dagSubmit(db, [await dagSourceLoad('name: b\ntasks:\n  a: { type: t, priority: 10, spec: { constraints: { estimated_tokens: 600 } } }\n  b: { type: t }\n', 'b.yaml')], { tenant: 'busy' });
    await agentCreate(db, 'w');
    // The claim logs what it served (a: its 600 estimated tokens); b stays READY.
    expect((await taskClaim(db, 'w', { limit: 1 })).map((t) => t.key)).toEqual(['a']);
    expect(await rows(sql`select tenant_id, tokens::int, tasks from tenant_served`)).toEqual([{ tenant_id: 'busy', tokens: 600, tasks: 1 }]);
    const loop = tenantShareCreate({ db });
    expect(await loop.runOnce()).toBe(1);
    // busy: 600 tokens at weight 2 → vtime 300; idle (and default), with nothing READY, come up to it.
    expect(await rows(sql`select id, vtime, served_tokens::int, served_tasks::int from tenants order by id`)).toEqual([
      { id: 'busy', vtime: 300, served_tokens: 600, served_tasks: 1 },
      { id: 'default', vtime: 300, served_tokens: 0, served_tasks: 0 },
      { id: 'idle', vtime: 300, served_tokens: 0, served_tasks: 0 },
    ]);
    expect(await rows(sql`select * from tenant_served`)).toEqual([]);
    expect(await loop.runOnce()).toBe(0);
  });

  loopTest(RETENTION_LOOP, 'a DAG finished longer ago than the period is deleted with its tasks, attempts and events; a recent one is kept', async () => {
    const DAY = 86_400;
    const old = await dagCreate(db, 'name: old\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');
    const recent = await dagCreate(db, 'name: recent\ntasks:\n  a: { type: t }\n');
    await drain(db, await agentCreate(db, 'worker'));
    expect(await rows(sql`select status from dags`)).toEqual([{ status: 'completed' }, { status: 'completed' }]);
    await db.execute(sql`update dags set completed_at = now() - interval '40 days', created_at = now() - interval '41 days' where id = ${old}`);
    const countsOf = async (dagId: string) => (await rows<Record<string, number>>(sql`select
      (select count(*)::int from dags where id = ${dagId}) as dags,
      (select count(*)::int from tasks where dag_id = ${dagId}) as tasks,
      (select count(*)::int from attempts where dag_id = ${dagId}) as attempts,
      (select count(*)::int from events where dag_id = ${dagId} or task_id in (select id from tasks where dag_id = ${dagId})) as events`))[0]!;
    const before = await countsOf(old);
    expect(before).toMatchObject({ dags: 1, tasks: 2, attempts: 2 });
    expect(before.events).toBeGreaterThan(0);
    const recentBefore = await countsOf(recent);

    const retention = retentionLoopCreate({ db, retentionSec: 30 * DAY });
    // What it counts as handled: the DAGs and events (and agents, deliveries) it deleted.
    expect(await retention.runOnce()).toBe(before.dags! + before.events!);
    expect(await countsOf(old)).toEqual({ dags: 0, tasks: 0, attempts: 0, events: 0 });
    expect(await countsOf(recent)).toEqual(recentBefore);
    expect(await rows(sql`select data->>'dags' as dags, data->>'by' as by from events where type = 'retention.pruned'`)).toEqual([{ dags: '1', by: 'retention' }]);

    expect(await retention.runOnce()).toBe(0);
  });

  loopTest(WORKSPACE_RECLAIMER_LOOP, 'the worktree of an attempt that completed is removed; a running attempt\'s is left alone', async () => {
    repoMake(path.join(scratch, 'repo'));
    const root = path.join(scratch, 'workspaces');
    const spec = await dagSourceLoad('name: ws\ntasks:\n  done: { type: t, priority: 10, workspace: { repo: repo } }\n  busy: { type: t, priority: 20, workspace: { repo: repo } }\n', 'ws.yaml', { baseDir: scratch, roots: [] });
    const dagId = (await dagSubmit(db, [spec]))[0]!.dagId;
    const claimed = await taskClaim(db, await agentCreate(db, 'coder'), { limit: 2, start: true });
    expect(claimed.map((t) => t.key)).toEqual(['done', 'busy']);
    const [done, busy] = await Promise.all(claimed.map((t) => workspaceOpen({ root, spec: t.spec.workspace!, dagId, taskId: t.id, taskKey: t.key, fence: t.fence })));
    await taskComplete(db, { taskId: claimed[0]!.id, fence: claimed[0]!.fence, output: {} });

    const reclaimer = workspaceReclaimerCreate({ db, root, keptSec: null });
    expect(await reclaimer.runOnce()).toBe(1);
    expect(existsSync(done!.path)).toBe(false);
    expect(existsSync(busy!.path)).toBe(true);
    expect(await reclaimer.runOnce()).toBe(0);
  });

  it('every loop the registry lists has its test here, once', () => {
    expect(new Set(tested).size).toBe(tested.length);
    expect([...tested].sort()).toEqual([...LOOP_NAMES].sort());
  });
});
