import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { cliWith } from '../helpers/cli.js';
import { testHttp } from '../helpers/http.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { agentCreate, dagCreate, databaseReset, rowsOf } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { budgetWatchCreate } from '../../src/maintenance/budget-watch.js';

const database = await testDatabase();
const { db } = database;
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
const watch = budgetWatchCreate({ db });
const http = await testHttp(database);
beforeEach(() => databaseReset(db));

const events = (dagId: string) => rowsOf<{ type: string; data: Record<string, unknown> }>(db, sql`
  select type, data from events where dag_id = ${dagId} and type in ('dag.blocked', 'dag.resumed', 'dag.budget_set') order by id`);
const dagRow = async (dagId: string) => (await rowsOf<{ status: string; blocked_reason: string | null; budget: number }>(db, sql`
  select status, blocked_reason, budget_usd::float8 as budget from dags where id = ${dagId}`))[0]!;

describe('a DAG that has spent its budget', () => {
  it('never holds the head of the queue: another DAG\'s affordable tasks behind its more urgent ones are claimed', async () => {
    // 30 urgent tasks of a DAG that can pay for none, then one task of another DAG, all for the same capability.
    const urgent = Array.from({ length: 30 }, (_, i) => `  u${i}: { type: t, priority: 0, spec: { constraints: { max_cost_usd: 1 } } }`).join('\n');
    const broke = await dagCreate(db, `name: broke\nbudget_usd: 0.5\ntasks:\n${urgent}\n`);
    const other = await dagCreate(db, 'name: other\ntasks:\n  later: { type: t, priority: 90 }\n');
    await agentCreate(db, 'worker');
    const claimed = await taskClaim(db, 'worker', { limit: 5 });
    expect(claimed.map((t) => [t.dagId, t.key])).toEqual([[other, 'later']]);
    expect((await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from tasks where dag_id = ${broke} and status = 'ready'`))[0]!.n).toBe(30);
  });

  it('shows blocked: budget (status, reason, event, webhook, tasks --unclaimable); `dagent dag budget` raises it, the DAG resumes and runs', async () => {
    const dagId = await dagCreate(db, 'name: capped\nbudget_usd: 1\ntasks:\n  first: { type: t, spec: { constraints: { max_cost_usd: 1 } } }\n  second: { type: t, depends_on: [first], spec: { constraints: { max_cost_usd: 1 } } }\n');
    await db.execute(sql`insert into webhooks (id, url, events) values ('whk_budgettest00000', 'http://example.invalid/hook', '{dag.blocked}')`);
    await agentCreate(db, 'payer');
    const [first] = await taskClaim(db, 'payer');
    await taskComplete(db, { taskId: first!.id, fence: first!.fence, output: 'done', costUsd: 0.75 });
    // Spend changed: the watch sees that 0.25 USD cannot pay for `second`'s 1 USD.
    expect(await watch.runOnce()).toBe(1);
    expect(await dagRow(dagId)).toEqual({ status: 'blocked', blocked_reason: 'budget: $0.2500 left of $1.0000, task second may cost $1.0000', budget: 1 });
    expect(await events(dagId)).toEqual([{ type: 'dag.blocked', data: { reason: 'budget', message: 'budget: $0.2500 left of $1.0000, task second may cost $1.0000' } }]);
    expect(await watch.runOnce()).toBe(0); // nothing new to say
    expect(await taskClaim(db, 'payer')).toEqual([]);
    const unclaimable = await cli('tasks', '--unclaimable', '--json');
    expect(unclaimable.json()).toEqual([expect.objectContaining({ key: 'second', reason: 'dag_budget' })]);
    const deliveries = await rowsOf<{ event_type: string }>(db, sql`select event_type from webhook_deliveries where webhook_id = 'whk_budgettest00000'`);
    expect(deliveries).toEqual([{ event_type: 'dag.blocked' }]);

    const bad = await cli('dag', 'budget', dagId, '--usd', 'lots');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--usd must be a number of USD, got lots/);
    const r = await cli('dag', 'budget', dagId, '--usd', '3', '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(r.json()).toMatchObject({ dagId, previous: 1, budgetUsd: 3, status: 'running', blockedReason: null });
    expect((await events(dagId)).map((e) => e.type)).toEqual(['dag.blocked', 'dag.budget_set', 'dag.resumed']);
    const [second] = await taskClaim(db, 'payer');
    expect(second?.key).toBe('second');
    await taskComplete(db, { taskId: second!.id, fence: second!.fence, output: 'done', costUsd: 1 });
    expect((await dagRow(dagId)).status).toBe('completed');
  });

  it('a lower budget blocks a DAG at once; an unknown DAG (exit 4) or a finished one (409, exit 1) changes nothing, and nothing changes', async () => {
    const dagId = await dagCreate(db, 'name: lowered\nbudget_usd: 5\ntasks:\n  a: { type: t, spec: { constraints: { max_cost_usd: 2 } } }\n');
    const r = await cli('dag', 'budget', dagId, '--usd', '1', '--json');
    expect(r.json()).toMatchObject({ status: 'blocked', blockedReason: 'budget: $1.0000 left of $1.0000, task a may cost $2.0000' });
    const unknown = await cli('dag', 'budget', 'dag_00000000000000', '--usd', '1');
    expect([unknown.code, unknown.stderr]).toEqual([4, expect.stringMatching(/DAG dag_00000000000000 not found/)]);
    await db.execute(sql`update dags set status = 'cancelled' where id = ${dagId}`);
    const done = await cli('dag', 'budget', dagId, '--usd', '9');
    expect(done.stderr).toMatch(/is cancelled: only a running or blocked DAG's budget can change/);
    expect((await dagRow(dagId)).budget).toBe(1);
  });

  it('POST /api/dags/:id/budget (admin) does the same; a read token is refused and a bad amount is a 400 naming usd', async () => {
    const dagId = await dagCreate(db, 'name: over-http\nbudget_usd: 0\ntasks:\n  a: { type: t, spec: { constraints: { max_cost_usd: 1 } } }\n');
    expect(await watch.runOnce()).toBe(1);
    const { token } = await tokenCreate(db, { role: 'read' });
    expect((await http.call('POST', `/api/dags/${dagId}/budget`, { token, body: { usd: 5 } })).status).toBe(403);
    const bad = await http.call('POST', `/api/dags/${dagId}/budget`, { body: { usd: -1 } });
    expect([bad.status, bad.body.error.message]).toEqual([400, expect.stringMatching(/usd/)]);
    const ok = await http.call('POST', `/api/dags/${dagId}/budget`, { body: { usd: 5 } });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ dagId, previous: 0, budgetUsd: 5, status: 'running' });
    expect((await events(dagId)).map((e) => e.type)).toEqual(['dag.blocked', 'dag.budget_set', 'dag.resumed']);
  });
});
