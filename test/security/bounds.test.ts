import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, databaseSnapshot, leaseExpire, rowsOf } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskStart } from '../../src/engine/attempt/lease.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';
import { httpAgent } from './helpers/agent.js';
import { refused, serverStart } from './helpers/server.js';

// Found by a hostile review: numbers an agent or a DAG author sends had no upper bound.
// A retry delay of 1e300 seconds overflowed run_at and the reaper retried the same rows forever;
// a cost of 1e8 overflowed numeric(14,6) (a 500, and every later report on that DAG failed too);
// a progress of 1e-320 underflowed the real column; failure details and dead-letter
// listings had no size limit.
const database = await testDatabase();
const { db } = database;
const server = await serverStart(database);

const submit = (yaml: string) => server.submit(yaml);

const ONE = (name: string, extra = '') => `name: ${name}\ntasks:\n  a: { type: w, max_attempts: 2, spec: { constraints: { capabilities: [b] } }${extra} }\n`;

describe('durations are bounded', () => {
  it('a retry delay, an estimate or a not_before further off than 366 days is refused at submit naming the field; nothing is written', async () => {
    for (const [extra, why] of [
      [', retry: { initial_delay: 1e300, max_delay: 1e300 }', /tasks\.a\.retry\.initial_delay: must be at most 366 days \(31622400 seconds\)/],
      [', estimate: 99999999999d', /tasks\.a\.estimate: must be at most 366 days/],
      [', not_before: 400d', /tasks\.a\.not_before: "400d" is further off than 366 days/],
    ] as const) {
      const before = await databaseSnapshot(db);
      await refused(400, 'DAG_INVALID', server.call('POST', '/api/dags', { raw: ONE('far-off', extra), contentType: 'application/yaml' }), why);
      expect(await databaseSnapshot(db)).toBe(before);
    }
    expect((await server.call('POST', '/api/dags', { raw: ONE('far-but-allowed', ', retry: { initial_delay: 366d, max_delay: 366d }'), contentType: 'application/yaml' })).status).toBe(201);
  });

  it('a subtask\'s estimate is bounded the same way', async () => {
    const dagId = await submit(ONE('spawn-estimate'));
    const agent = await httpAgent(server, db, 'estimator', { capabilities: ['b'] });
    const [t] = await agent.claim(dagId, 1);
    await refused(400, 'INVALID_INPUT', agent.spawn(t!, [{ key: 'x', type: 'w', estimate: 1e300 }]), /subtasks\[0\]\.estimate: must be at most 366 days/);
  });
});

describe('reports are bounded', () => {
  it('a cost over the per-report limit is a 400 naming cost_usd; spend adds up past the old numeric(14,6) ceiling without an error', async () => {
    const dagId = await submit(ONE('costly'));
    const agent = await httpAgent(server, db, 'spender', { capabilities: ['b'] });
    const [t] = await agent.claim(dagId, 1);
    await refused(400, 'INVALID_INPUT', server.call('POST', `/api/tasks/${t!.id}/complete`, { token: agent.token, body: { fence: t!.fence, output: 1, cost_usd: 1e7 } }), /cost_usd/);
    // As if the DAG and the agent had spent nearly 10^8 before: the next report takes them past it.
    await db.execute(sql`update dags set spent_usd = 99999999.5 where id = ${dagId}`);
    await db.execute(sql`update agents set spent_usd = 99999999.5 where id = 'spender'`);
    const ok = await server.call('POST', `/api/tasks/${t!.id}/complete`, { token: agent.token, body: { fence: t!.fence, output: 1, cost_usd: 1_000_000 } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const [spent] = await rowsOf<{ dag: string; agent: string }>(db, sql`
      select (select spent_usd::text from dags where id = ${dagId}) as dag, (select spent_usd::text from agents where id = 'spender') as agent`);
    expect(spent).toEqual({ dag: '100999999.5', agent: '100999999.5' });
  });

  it('a progress of 1e-320 is recorded as 0, not a 500', async () => {
    const dagId = await submit(ONE('tiny-progress'));
    const agent = await httpAgent(server, db, 'progressor', { capabilities: ['b'] });
    const [t] = await agent.claim(dagId, 1);
    const r = await server.call('POST', `/api/tasks/${t!.id}/heartbeat`, { token: agent.token, body: { fence: t!.fence, progress: 1e-320 } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const [row] = await rowsOf<{ progress: number }>(db, sql`select progress from tasks where id = ${t!.id}`);
    expect(row!.progress).toBe(0);
  });

  it('failure details over 64 KiB are a 400 naming details, and the task stays as it was; the dead-letter list leaves histories to the entry', async () => {
    const dagId = await submit(ONE('detailed'));
    const agent = await httpAgent(server, db, 'detailer', { capabilities: ['b'] });
    const [t] = await agent.claim(dagId, 1);
    const before = await databaseSnapshot(db);
    const fail = (details: unknown) => server.call('POST', `/api/tasks/${t!.id}/fail`, { token: agent.token, body: { fence: t!.fence, error_class: 'bad', message: 'no', retryable: false, details } });
    await refused(400, 'INVALID_INPUT', fail({ blob: 'x'.repeat(70_000) }), /details: at most 65536 bytes as JSON/);
    expect(await databaseSnapshot(db)).toBe(before);
    expect((await fail({ blob: 'x'.repeat(60_000) })).status).toBe(200);
    const list = await server.call('GET', `/api/dlq?dag_id=${dagId}`);
    expect(list.status).toBe(200);
    expect(list.body.entries).toHaveLength(1);
    expect(list.body.entries[0]).not.toHaveProperty('history');
    const one = await server.call('GET', `/api/dlq/${list.body.entries[0].id}`);
    expect(one.body.entry.history[0].details.blob).toHaveLength(60_000);
  });
});

describe('the reaper is not held up by tasks it cannot take back', () => {
  it('a lapsed task whose failure keeps erroring is set aside; the lapsed tasks behind it are reaped', async () => {
    const dagId = await dagCreate(db, 'name: reap-past\ntasks:\n  stuck: { type: r, priority: 0 }\n  fine: { type: r, priority: 50, retry: { strategy: immediate } }\n');
    await agentCreate(db, 'reap-agent');
    const held = await taskClaim(db, 'reap-agent', { limit: 2, dagId });
    for (const t of held) {
      await taskStart(db, { taskId: t.id, fence: t.fence });
      await leaseExpire(db, t.id);
    }
    const stuck = held.find((t) => t.key === 'stuck')!;
    // An unexpected database error on that one row, whatever its cause.
    await db.execute(sql.raw(`
      create or replace function test_reap_refuse() returns trigger language plpgsql as $$
      begin raise exception 'injected failure for %', old.id; end $$;
      create trigger test_reap_refuse before update on tasks for each row when (old.id = '${stuck.id}' and new.status <> old.status)
        execute function test_reap_refuse();`));
    try {
      // The stuck task's lease lapsed first, so a batch of one picks it first.
      await db.execute(sql`update tasks set lease_expires_at = now() - interval '1 hour' where id = ${stuck.id}`);
      const reaper = reaperCreate({ db, batch: 1 });
      expect(await reaper.runOnce()).toBe(0);
      expect(await reaper.runOnce()).toBe(1);
      const rows = await rowsOf<{ key: string; status: string }>(db, sql`select key, status from tasks where dag_id = ${dagId} order by key`);
      expect(rows).toEqual([{ key: 'fine', status: 'ready' }, { key: 'stuck', status: 'running' }]);
    } finally {
      await db.execute(sql.raw('drop trigger test_reap_refuse on tasks; drop function test_reap_refuse();'));
    }
  });
});

describe('DAG size limits hold under concurrent spawns', () => {
  it('two spawns racing past tasks_per_dag: one is refused, the DAG never holds more; edges past edges_per_dag are refused naming the limit', async () => {
    const small = await serverStart(database, { env: { DAGENT_LIMIT_TASKS_PER_DAG: '12', DAGENT_LIMIT_EDGES_PER_DAG: '20' } });
    try {
      for (let round = 0; round < 5; round++) {
        const r = await small.call('POST', '/api/dags', { raw: `name: race-${round}\ntasks:\n  h1: { type: w, spec: { constraints: { capabilities: [race] } } }\n  h2: { type: w, spec: { constraints: { capabilities: [race] } } }\n`, contentType: 'application/yaml' });
        const dagId = r.body.results[0].dagId;
        const agent = await httpAgent(small, db, `racer-${round}`, { capabilities: ['race'] });
        const held = await agent.claim(dagId, 2);
        expect(held).toHaveLength(2);
        const six = (p: string) => Array.from({ length: 6 }, (_, i) => ({ key: `${p}${i}`, type: 'w' }));
        const replies = await Promise.all(held.map((t, i) => agent.spawn(t, six(`s${i}`))));
        expect(replies.map((x) => x.status).sort()).toEqual([200, 400]);
        expect(replies.find((x) => x.status === 400)!.body.error.message).toMatch(/has 8 tasks; 6 more would pass the limit of 12 \(DAGENT_LIMIT_TASKS_PER_DAG\)/);
        const [n] = await rowsOf<{ n: number; total: number }>(db, sql`select count(*)::int as n, (select tasks_total from dags where id = ${dagId}) as total from tasks where dag_id = ${dagId}`);
        expect(n).toEqual({ n: 8, total: 8 });
      }
      const r = await small.call('POST', '/api/dags', { raw: 'name: edgy\ntasks:\n  h: { type: w, spec: { constraints: { capabilities: [edge] } } }\n  a: { type: w }\n  b: { type: w }\n', contentType: 'application/yaml' });
      const dagId = r.body.results[0].dagId;
      const agent = await httpAgent(small, db, 'edger', { capabilities: ['edge'] });
      const [h] = await agent.claim(dagId, 1);
      // Subtasks after a, b and up to two earlier ones: five make 17 edges, which fit; seven make 25, which do not.
      const chain = (n: number) => Array.from({ length: n }, (_, i) => ({ key: `c${i}`, type: 'w', depends_on: ['a', 'b', ...Array.from({ length: i }, (_, j) => `c${j}`)].slice(0, 4) }));
      await refused(400, 'INVALID_INPUT', agent.spawn(h!, chain(7)), /has 0 dependencies; 2\d more would pass the limit of 20 \(DAGENT_LIMIT_EDGES_PER_DAG\)/);
      expect((await agent.spawn(h!, chain(5))).status).toBe(200);
      // At submit too: seven tasks each after all before it are 21 edges.
      const keys = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
      const all = keys.map((k, i) => `  ${k}: { type: w, depends_on: [${keys.slice(0, i).join(', ')}] }`).join('\n');
      await refused(400, 'DAG_INVALID', small.call('POST', '/api/dags', { raw: `name: dense\ntasks:\n${all}\n`, contentType: 'application/yaml' }),
        /tasks\.g\.depends_on: more than 20 dependencies in the DAG \(DAGENT_LIMIT_EDGES_PER_DAG\)/);
    } finally {
      await small.stop();
    }
  });
});
