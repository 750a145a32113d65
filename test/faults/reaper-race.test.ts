import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { pino } from 'pino';
import { databaseOpen } from '../../src/db/open.js';
import { taskClaim, type ClaimedTask } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';
import { LeaseLostError } from '../../src/errors.js';
import { textArray } from '../../src/db/statement.js';
import { openOptionsLike, testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';

// A holder's completion racing the reaper that takes its lapsed lease back, on real concurrent connections: exactly
// one side wins each task, a holder that lost always hears LEASE_LOST (what agents act on: stop, do not retry; never
// CONFLICT, which says the agent itself reported another result), and no statement of either deadlocks another.
//
// Run twice. With budgets, the reaper's failure settles the reservation on the agent's and the DAG's rows. Without,
// it settles nothing, and the DAG's row is reached only through the foreign key tasks.dag_id: the retry (or the dead
// letter) writes the task row a second time in the failure's transaction, and PostgreSQL's check of that key then
// takes a KEY SHARE lock on the DAG's row, which the concurrent completions' updates of that row turn into a
// multixact. A completion that locked the row's newest version and then updated the version its snapshot saw queued
// behind a completion waiting for it (one held the newest version, the other the older version's tuple lock): 4 to 17
// completions per run were deadlock victims, in 6 runs of 6, before the failure's transaction held the DAG's row itself
// (docs/architecture.md, "Lock order"). The size is what makes the race sure to show it: without that lock, 2,000 tasks
// had 2 to 15 victims in 11 runs of 11, 1,000 tasks 0 to 9 (none in 1 run of 21), 500 tasks none in 1 run of 4.
const database = await testDatabase({ poolSize: 4 });
const { db } = database;
const deadlocks = async () => (await rowsOf<{ n: number }>(db, sql`select deadlocks::int as n from pg_stat_database where datname = current_database()`))[0]!.n;

const TASKS = 2000;
/** One task in LAPSED_EVERY ran past its max duration: the reaper fails them while the others complete. */
const LAPSED_EVERY = 4;
const HOLDERS = 6;
const REAPERS = 2;

describe('a late completion racing the reaper', () => {
  it.each([
    { budgets: true, name: 'with budgets (the failure settles spend on the agent and the DAG)' },
    { budgets: false, name: 'without budgets (the failure writes no DAG row, its foreign key locks it)' },
  ])(`${TASKS / LAPSED_EVERY} of ${TASKS} tasks in two DAGs run past their max duration, $name: the reaper fails them while the others complete, one side wins each race, the loser hears LEASE_LOST, no deadlock`, async ({ budgets }) => {
    const tag = budgets ? 'b' : 'u';
    const dag = (name: string) => [`name: ${name}`, ...(budgets ? ['budget_usd: 100000'] : []), 'defaults: { retry: { strategy: immediate }, max_attempts: 5 }', 'tasks:',
      // Every other task has one attempt: the reaper's failure dead-letters it (and blocks its DAG), the rest retry.
      ...Array.from({ length: TASKS / 2 }, (_, i) => `  t${i}: { type: t, max_attempts: ${i % 2 ? 1 : 5}${budgets ? ', spec: { constraints: { max_cost_usd: 1 } }' : ''} }`)].join('\n');
    const dags = [await dagCreate(db, dag(`race-${tag}-a`)), await dagCreate(db, dag(`race-${tag}-b`))];
    const holders = await Promise.all(Array.from({ length: HOLDERS }, (_, i) => agentCreate(db, `holder-${tag}-${i}`, [], budgets ? 100_000 : undefined, { maxConcurrent: TASKS })));
    const held: ClaimedTask[] = [];
    // Only from this case's DAGs (the other case's retried tasks are READY in the same database).
    for (let i = 0; held.length < TASKS && i < 100; i++) held.push(...await taskClaim(db, holders[i % HOLDERS]!, { limit: 50, start: true, dagId: dags[i % 2] }));
    expect(held).toHaveLength(TASKS);
    const lapsed = held.filter((_, i) => i % LAPSED_EVERY === 0);
    // Each ran past its max duration (its lease still current): the reaper fails the attempt (class timeout), charged
    // whatever else its agent holds (a lapsed lease's crash would be shared out among the agent's tasks, not failed).
    await db.execute(sql`update tasks set max_duration_sec = 1, started_at = now() - interval '10 seconds', heartbeat_at = now(),
      lease_expires_at = now() + interval '10 minutes' where id = any(${textArray(lapsed.map((t) => t.id))})`);

    const conns = await Promise.all(Array.from({ length: HOLDERS + REAPERS }, () => databaseOpen({ ...openOptionsLike(database), migrate: false, poolSize: 1 })));
    const before = await deadlocks();
    const outcomes = { completed: 0, leaseLost: 0, other: [] as string[] };
    // What the reaper could not take back (it logs the error and sets the task aside).
    const reaperErrors: string[] = [];
    const log = pino({ level: 'error' }, { write: (line: string) => void reaperErrors.push(JSON.parse(line).err?.message ?? line) });
    const reapers = conns.slice(HOLDERS).map((c) => reaperCreate({ db: c.db, batch: 10, log }));
    // Popped from the end: the others' completions first, while the reaper fails the lapsed tasks, then the late ones.
    const shuffled = (ts: ClaimedTask[]) => [...ts].sort(() => Math.random() - 0.5);
    const queue = [...shuffled(lapsed), ...shuffled(held.filter((t) => !lapsed.includes(t)))];
    try {
      await Promise.all([
        // Two reaper passes at a time, ten tasks a statement, until nothing is lapsed.
        ...reapers.map(async (reaper) => { while (await reaper.runOnce() > 0); }),
        // The holders' completions arrive meanwhile, in a shuffled order: each writes its DAG's row.
        ...conns.slice(0, HOLDERS).map(async (c) => {
          for (let t = queue.pop(); t; t = queue.pop()) {
            await taskComplete(c.db, { taskId: t.id, fence: t.fence, output: { late: true }, costUsd: 0.5 })
              .then(() => outcomes.completed++)
              .catch((e: unknown) => (e instanceof LeaseLostError ? outcomes.leaseLost++ : outcomes.other.push(String(e))));
          }
        }),
      ]);
    } finally {
      // A backend adds its deadlocks to pg_stat_database when it exits, before it leaves pg_stat_activity.
      const pids = (await Promise.all(conns.map((c) => rowsOf<{ pid: number }>(c.db, sql`select pg_backend_pid() as pid`).catch(() => [])))).flat().map((r) => r.pid);
      await Promise.all(conns.map((c) => c.close()));
      await eventually('the race\'s connections closed', async () => (await rowsOf<{ n: number }>(db, sql`
        select count(*)::int as n from pg_stat_activity where pid = any(${sql.param(pids)}::int[])`))[0]!.n === 0);
    }
    expect(outcomes.other).toEqual([]);
    expect(reaperErrors).toEqual([]);
    expect(outcomes.completed + outcomes.leaseLost).toBe(TASKS);
    // The reaper won some and the holders some (else the race was not run).
    expect(outcomes.leaseLost).toBeGreaterThan(0);
    expect(outcomes.completed).toBeGreaterThan(TASKS - lapsed.length);
    // Exactly one side won each: a completed task's attempt under the holder's fence completed, a reaped one failed.
    const attempts = await rowsOf<{ outcome: string; n: number }>(db, sql`
      select a.outcome, count(*)::int as n from attempts a join tasks t on t.id = a.task_id
      where t.dag_id in (${dags[0]}, ${dags[1]}) and a.fence = 1 group by a.outcome order by a.outcome`);
    expect(attempts).toEqual([{ outcome: 'completed', n: outcomes.completed }, { outcome: 'failed', n: outcomes.leaseLost }]);
    expect(await deadlocks()).toBe(before);
    // The ledgers add up: what the DAGs spent is what their attempts cost, and nothing is left reserved by the holders.
    const [ledger] = await rowsOf<{ spent: number; cost: number; reserved: number }>(db, sql`
      select (select sum(spent_usd) from dags where id in (${dags[0]}, ${dags[1]}))::float8 as spent,
             (select sum(cost_usd) from attempts where dag_id in (${dags[0]}, ${dags[1]}))::float8 as cost,
             (select sum(reserved_usd) from agents where id like ${`holder-${tag}-%`})::float8 as reserved`);
    expect(ledger!.spent).toBeCloseTo(ledger!.cost, 6);
    expect(ledger!.reserved).toBe(0);
  }, 120_000);
});
