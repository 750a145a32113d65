import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../src/db/open.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { openOptionsLike, testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, rowsOf } from '../helpers/factories.js';

// Budgeted claims locked the agent row, then the DAG row; completions and failures locked the
// DAG row, then the agent row. Under contention they deadlocked (309 deadlocks for 46 claims).
// One lock order now: agents, then DAGs (docs/architecture.md, "Lock order").
const database = await testDatabase({ poolSize: 4 });
const { db } = database;

const deadlocks = async () => (await rowsOf<{ n: number }>(db, sql`select deadlocks::int as n from pg_stat_database where datname = current_database()`))[0]!.n;

describe('one lock order for agents and DAGs', () => {
  it('4 budgeted agents on 16 connections claiming, completing and failing in two budgeted DAGs at once: no deadlock, and the ledgers add up', async () => {
    const dag = (name: string) => [`name: ${name}`, 'budget_usd: 1000', 'defaults: { retry: { strategy: immediate }, max_attempts: 20 }', 'tasks:',
      ...Array.from({ length: 120 }, (_, i) => `  t${i}: { type: t, spec: { constraints: { max_cost_usd: 0.5 } } }`)].join('\n');
    const dags = [await dagCreate(db, dag('ledger-a')), await dagCreate(db, dag('ledger-b'))];
    const workers = [];
    for (let i = 0; i < 16; i++) workers.push({
      conn: await databaseOpen({ ...openOptionsLike(database), migrate: false, poolSize: 1 }),
      // Four connections per agent, as an agent with four slots (or four processes of one agent) has.
      agentId: i < 4 ? await agentCreate(db, `spender-${i}`, [], 10_000) : `spender-${i % 4}`,
    });
    const before = await deadlocks();
    await Promise.all(workers.map(async ({ conn, agentId }) => {
      // Until both DAGs are done: a task another worker failed comes back READY at once.
      const open = async () => (await rowsOf<{ n: number }>(conn.db, sql`select count(*)::int as n from dags where id in (${dags[0]}, ${dags[1]}) and status = 'running'`))[0]!.n;
      while (await open() > 0) {
        const [t] = await taskClaim(conn.db, agentId, { limit: 1, start: true });
        if (!t) continue;
        // Every fifth task fails its first attempt (and is retried at once), the rest complete: both settle spend on the agent and the DAG.
        if (t.attempt === 1 && Number(t.key.slice(1)) % 5 === 0) await taskFail(conn.db, { taskId: t.id, fence: t.fence, errorClass: 'flaky', message: 'again', costUsd: 0.1 });
        else await taskComplete(conn.db, { taskId: t.id, fence: t.fence, output: { by: agentId }, costUsd: 0.25 });
      }
    }));
    await Promise.all(workers.map((w) => w.conn.close()));
    await new Promise((r) => setTimeout(r, 1500)); // statistics reach pg_stat_database within a second
    expect(await deadlocks()).toBe(before);
    const [open] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from tasks where dag_id in (${dags[0]}, ${dags[1]}) and status <> 'completed'`);
    expect(open!.n).toBe(0);
    const ledger = await rowsOf<{ spent: number; reserved: number; attempts_cost: number }>(db, sql`
      select (select sum(spent_usd) from dags where id in (${dags[0]}, ${dags[1]}))::float8 as spent,
             (select sum(reserved_usd) from dags where id in (${dags[0]}, ${dags[1]}))::float8 as reserved,
             (select sum(cost_usd) from attempts where dag_id in (${dags[0]}, ${dags[1]}))::float8 as attempts_cost`);
    expect(ledger[0]!.reserved).toBe(0);
    expect(ledger[0]!.spent).toBeCloseTo(ledger[0]!.attempts_cost, 6);
  });
});
