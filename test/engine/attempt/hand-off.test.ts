import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../../src/db/open.js';
import type { HandOff } from '../../../src/db/rows.js';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskCompleteMany } from '../../../src/engine/attempt/complete.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, rowsOf } from '../../helpers/factories.js';
import { eventually } from '../../helpers/wait.js';

const database = await testDatabase();
const { db } = database;

const handTo = (agentId: string, max = 5, capabilities: string[] = []): HandOff => ({ agentId, capabilities, max, start: true, claimTtlSec: 60 });

async function taskOf(dagId: string, key: string) {
  const [t] = await rowsOf<{ id: string; status: string; claimed_by: string | null; fence: number; attempts: number; lease_expires_at: string | null }>(db, sql`
    select id, status, claimed_by, fence, attempts, lease_expires_at from tasks where dag_id = ${dagId} and key = ${key}`);
  return t!;
}

/** Claim the DAG's task `key` (the only READY one of the agent's groups) and complete it with `output`, handing to the agent. */
async function completeHanding(agentId: string, dagId: string, key: string, output: unknown, hand: HandOff = handTo(agentId)) {
  const [t] = await taskClaim(db, agentId, { limit: 1, dagId, start: true });
  expect(t?.key).toBe(key);
  return taskCompleteMany(db, [{ taskId: t!.id, fence: t!.fence, output }], { handTo: hand });
}

describe('a completion hands the dependents it unblocks to the completing agent', () => {
  beforeEach(() => databaseReset(db));

  it('hands a dependent no one else should have first: RUNNING, claimed by the agent, with the upstream output just stored', async () => {
    const a = await agentCreate(db, 'hand-a');
    const dagId = await dagCreate(db, 'name: pair\ntasks:\n  plan: { type: t }\n  write: { type: t, depends_on: [plan], spec: { context: [plan] } }\n');
    const writer = async () => (await rowsOf<{ w: string | null }>(db, sql`select claim_writer::text as w from agents where id = ${a}`))[0]!.w;
    const [plan] = await taskClaim(db, a, { limit: 1, dagId, start: true });
    const claimedBy = await writer();
    const r = await taskCompleteMany(db, [{ taskId: plan!.id, fence: plan!.fence, output: { outline: [1, 2] } }], { handTo: handTo(a) });
    expect(r.handed.map((t) => [t.key, t.attempt, t.started])).toEqual([['write', 1, true]]);
    // Stamped as a claim stamps it: a claim of this agent whose snapshot predates the hand-off counts again.
    expect(await writer()).not.toBe(claimedBy);
    expect(r.handed[0]!.inputs).toEqual({ plan: { outline: [1, 2] } });
    expect(r.unblocked).toBe(0);
    const write = await taskOf(dagId, 'write');
    expect(write).toMatchObject({ status: 'running', claimed_by: a, fence: r.handed[0]!.fence, attempts: 1 });
    expect(write.lease_expires_at).not.toBeNull();
    // Its first beat is its claim's instant, as for a claim straight into RUNNING: until its agent shows a sign of
    // life, a lapse of its lease is a lost hand-off, not a crash (taskLeaseExpiredList).
    const [stamps] = await rowsOf<{ same: boolean }>(db, sql`select heartbeat_at = claimed_at and started_at = claimed_at as same from tasks where dag_id = ${dagId} and key = 'write'`);
    expect(stamps!.same).toBe(true);
    // It runs and completes like any claimed task.
    const done = await taskCompleteMany(db, [{ taskId: write.id, fence: write.fence, output: 'text' }], { handTo: handTo(a) });
    expect(done.completed).toEqual([write.id]);
    expect((await rowsOf<{ status: string }>(db, sql`select status from dags where id = ${dagId}`))[0]!.status).toBe('completed');
  });

  it('keeps priority order: a READY task of a group the agent covers that is as urgent or more goes first, the dependent goes READY', async () => {
    const a = await agentCreate(db, 'hand-b');
    const dagId = await dagCreate(db, 'name: pair\ntasks:\n  up: { type: t, priority: 40 }\n  down: { type: t, depends_on: [up], priority: 40 }\n');
    const other = await dagCreate(db, 'name: urgent\ntasks:\n  now: { type: t, priority: 5 }\n');
    // Take the upstream first, though the other DAG's task is more urgent.
    const [up] = await taskClaim(db, a, { limit: 1, dagId, start: true });
    const r = await taskCompleteMany(db, [{ taskId: up!.id, fence: up!.fence, output: 1 }], { handTo: handTo(a) });
    expect(r.handed).toEqual([]);
    expect(r.unblocked).toBe(1);
    expect((await taskOf(dagId, 'down')).status).toBe('ready');
    const [next] = await taskClaim(db, a, { limit: 1 });
    expect(next!.dagId).toBe(other);
  });

  it('hands nothing past a more urgent dependent it may not hand (a max cost), nor what names a model, a concurrency key or has a DAG budget', async () => {
    const a = await agentCreate(db, 'hand-c', [], 10);
    const dagId = await dagCreate(db, `name: fan
tasks:
  up: { type: t }
  costly: { type: t, depends_on: [up], priority: 10, spec: { constraints: { max_cost_usd: 1 } } }
  plain: { type: t, depends_on: [up], priority: 60 }
  keyed: { type: t, depends_on: [up], priority: 70, concurrency: { key: k, limit: 1 } }
`);
    const r = await completeHanding(a, dagId, 'up', 1);
    expect(r.handed).toEqual([]);
    expect(r.unblocked).toBe(3);
    // Without the costly one ahead, the plain one is handed and the keyed one is not.
    const second = await dagCreate(db, 'name: fan2\ntasks:\n  up: { type: t, priority: 1 }\n  plain: { type: t, depends_on: [up], priority: 1 }\n  keyed: { type: t, depends_on: [up], priority: 2, concurrency: { key: k2, limit: 1 } }\n');
    const r2 = await completeHanding(a, second, 'up', 1);
    expect(r2.handed.map((t) => t.key).sort()).toEqual(['plain']);
    const budgeted = await dagCreate(db, 'name: fan3\nbudget_usd: 5\ntasks:\n  up: { type: t, priority: 0 }\n  next: { type: t, depends_on: [up], priority: 0 }\n');
    const r3 = await completeHanding(a, budgeted, 'up', 1);
    expect(r3.handed).toEqual([]);
  });

  it('hands no more than the agent may hold (max_concurrent, the completed tasks counted out) and no more than asked', async () => {
    const a = await agentCreate(db, 'hand-d', [], undefined, { maxConcurrent: 2 });
    const dagId = await dagCreate(db, 'name: wide\ntasks:\n  up: { type: t, priority: 0 }\n  d1: { type: t, depends_on: [up], priority: 1 }\n  d2: { type: t, depends_on: [up], priority: 2 }\n  d3: { type: t, depends_on: [up], priority: 3 }\n  spare: { type: t, priority: 90 }\n');
    // It holds `spare` while it completes `up`.
    const [up] = await taskClaim(db, a, { limit: 1, dagId, start: true });
    const [held] = await taskClaim(db, a, { limit: 1, dagId, start: true });
    expect([up!.key, held!.key]).toEqual(['up', 'spare']);
    const r = await taskCompleteMany(db, [{ taskId: up!.id, fence: up!.fence, output: 1 }], { handTo: handTo(a, 5) });
    // max_concurrent 2, holding `spare`: one slot, the most urgent.
    expect(r.handed.map((t) => t.key)).toEqual(['d1']);
    expect(r.unblocked).toBe(2);
    const b = await agentCreate(db, 'hand-e');
    const other = await dagCreate(db, 'name: wide2\ntasks:\n  up: { type: t, priority: 0 }\n  d1: { type: t, depends_on: [up], priority: 0 }\n  d2: { type: t, depends_on: [up], priority: 0 }\n');
    const r2 = await completeHanding(b, other, 'up', 1, handTo(b, 1));
    expect(r2.handed).toHaveLength(1);
  });

  it('hands nothing when a claim of the same agent committed after the completion began (it counted held tasks too early)', async () => {
    const a = await agentCreate(db, 'hand-f', [], undefined, { maxConcurrent: 2 });
    const dagId = await dagCreate(db, 'name: race\ntasks:\n  up: { type: t, priority: 0 }\n  down: { type: t, depends_on: [up], priority: 0 }\n  other: { type: t, priority: 50 }\n');
    const [up] = await taskClaim(db, a, { limit: 1, dagId, start: true });
    expect(up!.key).toBe('up');
    // A third connection holds the agent's row; the claim queues for it first, then the completion.
    const [locker, claimer, completer] = await Promise.all([1, 2, 3].map(() => databaseOpen({ url: database.url, migrate: false, poolSize: 1 })));
    const waiting = (n: number) => eventually(`${n} statements waiting for a lock`, async () => {
      const [w] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`);
      return w!.n >= n;
    });
    try {
      let release!: () => void;
      const held = new Promise<void>((r) => { release = r; });
      const lock = locker!.db.transaction(async (tx) => {
        await tx.execute(sql`select 1 from agents where id = ${a} for update`);
        await held;
      });
      await waiting(0);
      const claim = taskClaim(claimer!.db, a, { limit: 1, start: true });
      await waiting(1);
      const complete = taskCompleteMany(completer!.db, [{ taskId: up!.id, fence: up!.fence, output: 1 }], { handTo: handTo(a, 5) });
      await waiting(2);
      release();
      await lock;
      const [claimed, completed] = await Promise.all([claim, complete]);
      expect(claimed.map((t) => t.key)).toEqual(['other']);
      expect(completed.completed).toEqual([up!.id]);
      // Counting from its snapshot, it would have handed `down` too: three held under a limit of two.
      expect(completed.handed).toEqual([]);
      expect((await taskOf(dagId, 'down')).status).toBe('ready');
      const [n] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from tasks where claimed_by = ${a} and status in ('claimed', 'running')`);
      expect(n!.n).toBeLessThanOrEqual(2);
    } finally {
      await Promise.all([locker, claimer, completer].map((c) => c!.close()));
    }
  });

  it('hands nothing to an agent whose daily cap is spent, nor a dependent of a DAG with a daily cap: they go READY for the claim', async () => {
    const { agentRegister } = await import('../../../src/engine/ops/agents.js');
    await agentRegister(db, { id: 'hand-daily', type: 'test', capabilities: [], maxConcurrent: 5, dailyBudgetUsd: 0.5 });
    const dagId = await dagCreate(db, 'name: pair\ntasks:\n  up: { type: t }\n  down: { type: t, depends_on: [up] }\n');
    const [up] = await taskClaim(db, 'hand-daily', { limit: 1, dagId, start: true });
    // Its completion reports 0.6: the agent's day is spent by the time the dependent could be handed.
    const r = await taskCompleteMany(db, [{ taskId: up!.id, fence: up!.fence, output: 1, costUsd: 0.6 }], { handTo: handTo('hand-daily') });
    expect([r.handed, (await taskOf(dagId, 'down')).status]).toEqual([[], 'ready']);
    const a = await agentCreate(db, 'hand-capped-dag');
    const capped = await dagCreate(db, 'name: capped\ndaily_budget_usd: 5\ntasks:\n  up: { type: t }\n  down: { type: t, depends_on: [up] }\n');
    const c = await completeHanding(a, capped, 'up', 1);
    expect([c.handed, (await taskOf(capped, 'down')).status]).toEqual([[], 'ready']);
  });
});
