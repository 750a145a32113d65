import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../src/db/open.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';
import { LeaseLostError } from '../../src/errors.js';
import { openOptionsLike, testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, rowsOf } from '../helpers/factories.js';

// A holder's completion racing the reaper that takes its lapsed lease back, on real concurrent connections: exactly
// one side wins each task, a holder that lost always hears LEASE_LOST (what agents act on: stop, do not retry; never
// CONFLICT, which says the agent itself reported another result), and no statement of either deadlocks another.
const database = await testDatabase({ poolSize: 4 });
const { db } = database;
const deadlocks = async () => (await rowsOf<{ n: number }>(db, sql`select deadlocks::int as n from pg_stat_database where datname = current_database()`))[0]!.n;

const TASKS = 300;
const HOLDERS = 6;

describe('a late completion racing the reaper', () => {
  it(`${TASKS} tasks run past their max duration: the reaper and the holders race; one side wins each, the loser hears LEASE_LOST, no deadlock`, async () => {
    // Costs and a budget so both sides settle spend on the agents and the DAGs' rows (the locks they share).
    const dag = (name: string) => [`name: ${name}`, 'budget_usd: 100000', 'defaults: { retry: { strategy: immediate }, max_attempts: 5 }', 'tasks:',
      // Every other task has one attempt: the reaper's failure dead-letters it (and blocks its DAG), the rest retry.
      ...Array.from({ length: TASKS / 2 }, (_, i) => `  t${i}: { type: t, max_attempts: ${i % 2 ? 1 : 5}, spec: { constraints: { max_cost_usd: 1 } } }`)].join('\n');
    const dags = [await dagCreate(db, dag('race-a')), await dagCreate(db, dag('race-b'))];
    const holders = await Promise.all(Array.from({ length: HOLDERS }, (_, i) => agentCreate(db, `holder-${i}`, [], 100_000)));
    const held = [];
    for (let i = 0; held.length < TASKS && i < 100; i++) held.push(...await taskClaim(db, holders[i % HOLDERS]!, { limit: 50, start: true }));
    expect(held).toHaveLength(TASKS);
    // Each ran past its max duration (its lease still current): the reaper fails the attempt (class timeout), charged
    // whatever else its agent holds (a lapsed lease's crash would be shared out among the agent's tasks, not failed).
    await db.execute(sql`update tasks set max_duration_sec = 1, started_at = now() - interval '10 seconds', heartbeat_at = now(),
      lease_expires_at = now() + interval '10 minutes' where dag_id in (${dags[0]}, ${dags[1]})`);

    const conns = await Promise.all(Array.from({ length: HOLDERS + 2 }, () => databaseOpen({ ...openOptionsLike(database), migrate: false, poolSize: 1 })));
    const before = await deadlocks();
    const outcomes = { completed: 0, leaseLost: 0, other: [] as string[] };
    const reapers = conns.slice(HOLDERS).map((c) => reaperCreate({ db: c.db, batch: 10 }));
    const queue = [...held].sort(() => Math.random() - 0.5);
    try {
      await Promise.all([
        // Two reaper passes at a time, ten tasks a statement, until nothing is lapsed.
        ...reapers.map(async (reaper) => { while (await reaper.runOnce() > 0); }),
        // The holders' completions arrive meanwhile, in a shuffled order.
        ...conns.slice(0, HOLDERS).map(async (c) => {
          for (let t = queue.pop(); t; t = queue.pop()) {
            await taskComplete(c.db, { taskId: t.id, fence: t.fence, output: { late: true }, costUsd: 0.5 })
              .then(() => outcomes.completed++)
              .catch((e: unknown) => (e instanceof LeaseLostError ? outcomes.leaseLost++ : outcomes.other.push(String(e))));
          }
        }),
      ]);
    } finally {
      await Promise.all(conns.map((c) => c.close()));
    }
    expect(outcomes.other).toEqual([]);
    expect(outcomes.completed + outcomes.leaseLost).toBe(TASKS);
    // The reaper won some and the holders some (else the race was not run).
    expect(outcomes.leaseLost).toBeGreaterThan(0);
    expect(outcomes.completed).toBeGreaterThan(0);
    // Exactly one side won each: a completed task's attempt under the holder's fence completed, a reaped one failed.
    const attempts = await rowsOf<{ outcome: string; n: number }>(db, sql`
      select a.outcome, count(*)::int as n from attempts a join tasks t on t.id = a.task_id
      where t.dag_id in (${dags[0]}, ${dags[1]}) and a.fence = 1 group by a.outcome order by a.outcome`);
    expect(attempts).toEqual([{ outcome: 'completed', n: outcomes.completed }, { outcome: 'failed', n: outcomes.leaseLost }]);
    await new Promise((r) => setTimeout(r, 1200)); // statistics reach pg_stat_database within a second
    expect(await deadlocks()).toBe(before);
    // The ledgers add up: what the DAGs spent is what their attempts cost, and nothing is left reserved by the holders.
    const [ledger] = await rowsOf<{ spent: number; cost: number; reserved: number }>(db, sql`
      select (select sum(spent_usd) from dags where id in (${dags[0]}, ${dags[1]}))::float8 as spent,
             (select sum(cost_usd) from attempts where dag_id in (${dags[0]}, ${dags[1]}))::float8 as cost,
             (select sum(reserved_usd) from agents where id like 'holder-%')::float8 as reserved`);
    expect(ledger!.spent).toBeCloseTo(ledger!.cost, 6);
    expect(ledger!.reserved).toBe(0);
  }, 120_000);
});
