import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { databaseReset, databaseSnapshot, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { tokenRevoke, tokenCreate } from '../../src/auth/tokens.js';
import { routeRegistry } from '../../src/http/route.js';

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const { call } = http;
beforeEach(() => databaseReset(db));

const CHAIN = `name: api-chain
tasks:
  plan: { type: plan, estimate: 5m }
  build: { type: build, depends_on: [plan], max_attempts: 1 }
  docs: { type: docs, depends_on: [plan] }
  ship: { type: ship, depends_on: [build, docs] }
`;

async function submit(yaml = CHAIN): Promise<string> {
  const r = await call('POST', '/api/dags', { raw: yaml, contentType: 'application/yaml' });
  expect(r.status).toBe(201);
  return r.body.results[0].dagId;
}

/** The request is refused with `status` and `code`, and not one row of any table changed. */
async function refusedUnchanged(status: number, code: string | null, request: () => Promise<{ status: number; body: any; headers: Headers }>) {
  const before = await databaseSnapshot(db);
  const r = await request();
  expect(r.status, JSON.stringify(r.body)).toBe(status);
  if (code) expect(r.body.error.code).toBe(code);
  expect(typeof r.body.error.message).toBe('string');
  expect(await databaseSnapshot(db)).toBe(before);
  return r;
}

/** Register `id` through the API with its own agent token; returns the token. */
async function agentUp(id: string, capabilities: string[] = []): Promise<string> {
  const token = await http.agentToken(id, capabilities);
  const r = await call('POST', '/api/agents', { token, body: { id, type: 'worker', capabilities } });
  expect(r.status).toBe(201);
  return token;
}

async function claimOne(id: string, token: string, start = true) {
  const r = await call('POST', `/api/agents/${id}/claim`, { token, body: { start } });
  expect(r.status).toBe(200);
  expect(r.body.tasks).toHaveLength(1);
  return r.body.tasks[0] as { id: string; key: string; fence: number; inputs: Record<string, unknown> };
}

describe('authentication', () => {
  it('no token, a wrong token, a revoked token: 401 and nothing changes', async () => {
    const r = await refusedUnchanged(401, 'UNAUTHORIZED', () => call('POST', '/api/dags', { token: null, raw: CHAIN, contentType: 'application/yaml' }));
    expect(r.status).toBe(401);
    await refusedUnchanged(401, 'UNAUTHORIZED', () => call('POST', '/api/dags', { token: 'dgt_not-a-real-token', raw: CHAIN, contentType: 'application/yaml' }));
    const revoked = await tokenCreate(db, { role: 'admin' });
    await tokenRevoke(db, revoked.id);
    await refusedUnchanged(401, 'UNAUTHORIZED', () => call('GET', '/api/dags', { token: revoked.token }));
    const noAuth = await call('GET', '/api/dlq', { token: null });
    expect(noAuth.headers.get('www-authenticate')).toMatch(/^Bearer/);
  });

  it('an agent token on a human route: 403 and nothing changes', async () => {
    const token = await http.agentToken('a1');
    await refusedUnchanged(403, 'FORBIDDEN', () => call('POST', '/api/dags', { token, raw: CHAIN, contentType: 'application/yaml' }));
    await refusedUnchanged(403, 'FORBIDDEN', () => call('GET', '/api/dlq', { token }));
    await refusedUnchanged(403, 'FORBIDDEN', () => call('GET', '/metrics', { token }));
  });

  it('public routes answer without a token', async () => {
    expect((await call('GET', '/healthz', { token: null })).body).toEqual({ ok: true });
    expect((await call('GET', '/openapi.json', { token: null })).status).toBe(200);
    const page = await fetch(`${http.url}/`);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
  });

  it('an unknown route is a JSON 404', async () => {
    const r = await call('GET', '/api/nope');
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe('NOT_FOUND');
  });
});

describe('submitting DAGs', () => {
  it('YAML, JSON and YAML-in-JSON with params each create a DAG in one transaction', async () => {
    const yamlDag = await submit();
    expect(await taskStatusByKey(db, yamlDag)).toEqual({ plan: 'ready', build: 'pending', docs: 'pending', ship: 'pending' });

    const json = await call('POST', '/api/dags', { body: { dag: { name: 'as-json', tasks: { one: { type: 't' } } } } });
    expect(json.status).toBe(201);
    expect(await taskStatusByKey(db, json.body.results[0].dagId)).toEqual({ one: 'ready' });

    const withParams = await call('POST', '/api/dags', {
      body: { yaml: 'name: p\nparams:\n  who: { description: a name }\ntasks:\n  greet: { type: t, spec: { prompt: "hi ${params.who}" } }\n', params: { who: 'ada' } },
    });
    expect(withParams.status, JSON.stringify(withParams.body)).toBe(201);
    const [t] = await rowsOf<{ spec: { prompt: string } }>(db, sql`select spec from tasks where dag_id = ${withParams.body.results[0].dagId}`);
    expect(t!.spec.prompt).toBe('hi ada');
    const [dag] = await rowsOf<{ created_by: string }>(db, sql`select created_by from dags where id = ${yamlDag}`);
    expect(dag!.created_by).toMatch(/^admin:tok_/);
  });

  it('an invalid DAG is a 400 naming line and field; nothing is written', async () => {
    const r = await refusedUnchanged(400, 'DAG_INVALID', () => call('POST', '/api/dags', {
      raw: 'name: bad\ntasks:\n  a: { type: t, depends_on: [nope] }\n', contentType: 'application/yaml',
    }));
    expect(r.body.error.problems[0]).toMatchObject({ file: 'request.yaml', line: 3 });
    expect(r.body.error.message).toMatch(/request\.yaml:3:\d+ .*nope/);
    await refusedUnchanged(400, 'DAG_INVALID', () => call('POST', '/api/dags', {
      raw: 'name: cyc\ntasks:\n  a: { type: t, depends_on: [b] }\n  b: { type: t, depends_on: [a] }\n', contentType: 'application/yaml',
    }));
  });

  it('malformed, wrongly shaped and oversized bodies: 400, 400, 413, 415; nothing is written', async () => {
    await refusedUnchanged(400, 'BAD_REQUEST', () => call('POST', '/api/dags', { raw: '{"dag": {', contentType: 'application/json' }));
    const both = await refusedUnchanged(400, 'INVALID_INPUT', () => call('POST', '/api/dags', { body: { yaml: 'name: x', dag: { name: 'x' } } }));
    expect(both.body.error.message).toMatch(/^body/);
    const extra = await refusedUnchanged(400, 'INVALID_INPUT', () => call('POST', '/api/dags', { body: { dag: { name: 'x' }, sneaky: 1 } }));
    expect(extra.body.error.message).toMatch(/sneaky|unrecognized/i);
    await refusedUnchanged(413, 'BODY_TOO_LARGE', () => call('POST', '/api/dags', { raw: `name: big\n# ${'x'.repeat(1_100_000)}\ntasks: {}\n`, contentType: 'application/yaml' }));
    await refusedUnchanged(415, 'UNSUPPORTED_MEDIA_TYPE', () => call('POST', '/api/dags', { raw: 'name=x', contentType: 'application/x-www-form-urlencoded' }));
  });

  it('backpressure: past the READY + PENDING limit a submission is a 429 with Retry-After and writes nothing', async () => {
    const limited = await testHttp(database, { maxQueued: 4 });
    const first = await limited.call('POST', '/api/dags', { raw: CHAIN, contentType: 'application/yaml' });
    expect(first.status).toBe(201); // 1 ready + 3 pending: at the limit now
    const r = await refusedUnchanged(429, 'BACKPRESSURE', () => limited.call('POST', '/api/dags', { raw: CHAIN, contentType: 'application/yaml' }));
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(r.body.error).toMatchObject({ queued: 4, limit: 4 });
    // Work drains: the queue drops below the limit and submissions are taken again.
    await rowsOf(db, sql`update tasks set status = 'completed' where key = 'plan'`);
    expect((await limited.call('POST', '/api/dags', { raw: CHAIN, contentType: 'application/yaml' })).status).toBe(201);
  });
});

describe('reading DAGs and tasks', () => {
  it('lists DAGs with task counts, draws one as a graph with its critical path, shows a task', async () => {
    const dagId = await submit();
    const list = await call('GET', '/api/dags');
    expect(list.body.dags.map((d: { id: string }) => d.id)).toEqual([dagId]);
    expect(list.body.dags[0].taskCounts).toEqual({ ready: 1, pending: 3 });
    expect((await call('GET', '/api/dags?status=bogus')).status).toBe(400);

    const g = await call('GET', `/api/dags/${dagId}`);
    expect(g.status).toBe(200);
    const depth = Object.fromEntries(g.body.nodes.map((n: { key: string; depth: number }) => [n.key, n.depth]));
    expect(depth).toEqual({ plan: 0, build: 1, docs: 1, ship: 2 });
    expect(g.body.edges).toHaveLength(4);
    expect(g.body.criticalPath[0]).toBe('plan');
    expect(g.body.criticalPath.at(-1)).toBe('ship');

    const tasks = await call('GET', `/api/tasks?dag_id=${dagId}&status=ready`);
    expect(tasks.body.tasks.map((t: { key: string }) => t.key)).toEqual(['plan']);
    const shown = await call('GET', `/api/tasks/${tasks.body.tasks[0].id}`);
    expect(shown.body.task.key).toBe('plan');
    expect(shown.body.attempts).toEqual([]);

    expect((await call('GET', '/api/dags/dag_missing')).status).toBe(404);
    expect((await call('GET', '/api/tasks/tsk_missing')).status).toBe(404);
  });
});

describe('human actions', () => {
  it('changes a task\'s and a DAG\'s priority; refuses an out-of-range one', async () => {
    const dagId = await submit();
    const [plan] = await rowsOf<{ id: string }>(db, sql`select id from tasks where dag_id = ${dagId} and key = 'plan'`);
    expect((await call('POST', `/api/tasks/${plan!.id}/priority`, { body: { priority: 5 } })).body).toEqual({ tasks: 1 });
    expect((await call('POST', `/api/dags/${dagId}/priority`, { body: { priority: 20 } })).body).toEqual({ tasks: 4 });
    const prios = await rowsOf<{ priority: number }>(db, sql`select distinct priority from tasks where dag_id = ${dagId}`);
    expect(prios).toEqual([{ priority: 20 }]);
    await refusedUnchanged(400, 'INVALID_INPUT', () => call('POST', `/api/tasks/${plan!.id}/priority`, { body: { priority: 101 } }));
    await refusedUnchanged(404, 'NOT_FOUND', () => call('POST', '/api/tasks/tsk_missing/priority', { body: { priority: 1 } }));
  });

  it('cancels a task (and what depends on it), then the DAG; cancelling again is a 409', async () => {
    const dagId = await submit();
    const [docs] = await rowsOf<{ id: string }>(db, sql`select id from tasks where dag_id = ${dagId} and key = 'docs'`);
    const r = await call('POST', `/api/tasks/${docs!.id}/cancel`, { body: { note: 'not needed' } });
    expect(r.body.cancelled.map((c: { key: string }) => c.key).sort()).toEqual(['docs', 'ship']);
    expect((await call('POST', `/api/dags/${dagId}/cancel`, { body: {} })).body).toEqual({ cancelled: 2 });
    await refusedUnchanged(409, 'ILLEGAL_TRANSITION', () => call('POST', `/api/dags/${dagId}/cancel`, { body: {} }));
  });
});

describe('the agent protocol', () => {
  it('register, claim, start, heartbeat, spawn, complete: a DAG runs to the end over HTTP', async () => {
    const dagId = await submit();
    const token = await agentUp('a1');
    expect((await call('POST', '/api/agents/a1/heartbeat', { token })).body).toEqual({ ok: true });

    const plan = await claimOne('a1', token, false);
    expect(plan.key).toBe('plan');
    expect((await call('POST', `/api/tasks/${plan.id}/start`, { token, body: { fence: plan.fence } })).status).toBe(200);
    const beat = await call('POST', `/api/tasks/${plan.id}/heartbeat`, { token, body: { fence: plan.fence, progress: 0.5, message: 'halfway' } });
    expect(new Date(beat.body.leaseExpiresAt).getTime()).toBeGreaterThan(Date.now());
    const spawned = await call('POST', `/api/tasks/${plan.id}/spawn`, { token, body: { fence: plan.fence, subtasks: [{ key: 'outline', type: 'outline' }] } });
    expect(spawned.status, JSON.stringify(spawned.body)).toBe(200);
    expect(spawned.body.children[0]).toMatchObject({ key: 'outline', created: true });
    const done = await call('POST', `/api/tasks/${plan.id}/complete`, { token, body: { fence: plan.fence, output: { steps: 3 }, cost_usd: 0.01 } });
    expect(done.body).toMatchObject({ completed: true, unblocked: 2 });

    for (let i = 0; i < 4; i++) {
      const t = await claimOne('a1', token);
      if (t.key === 'build' || t.key === 'docs') expect(t.inputs).toEqual({});
      expect((await call('POST', `/api/tasks/${t.id}/complete`, { token, body: { fence: t.fence, output: { key: t.key } } })).body.completed).toBe(true);
    }
    expect(await taskStatusByKey(db, dagId)).toEqual({ plan: 'completed', 'plan/outline': 'completed', build: 'completed', docs: 'completed', ship: 'completed' });
    expect((await call('GET', `/api/dags/${dagId}`)).body.dag.status).toBe('completed');
    const attempts = await rowsOf<{ agent_id: string }>(db, sql`select distinct agent_id from attempts where dag_id = ${dagId}`);
    expect(attempts).toEqual([{ agent_id: 'a1' }]);
    expect((await call('POST', '/api/agents/a1/claim', { token, body: {} })).body.tasks).toEqual([]);
  });

  it('an agent token acts only as its agent and only on tasks that agent holds (403, nothing changes)', async () => {
    await submit();
    const a1 = await agentUp('a1');
    const a2 = await agentUp('a2');
    await refusedUnchanged(403, 'FORBIDDEN', () => call('POST', '/api/agents', { token: a1, body: { id: 'a2', type: 'x', capabilities: ['gpu'] } }));
    await refusedUnchanged(403, 'FORBIDDEN', () => call('POST', '/api/agents/a2/claim', { token: a1, body: {} }));
    await refusedUnchanged(403, 'FORBIDDEN', () => call('POST', '/api/agents/a2/heartbeat', { token: a1 }));
    const held = await claimOne('a1', a1);
    for (const [path, body] of [
      ['complete', { fence: held.fence, output: 'stolen' }],
      ['fail', { fence: held.fence, error_class: 'crash', message: 'x' }],
      ['heartbeat', { fence: held.fence }],
      ['release', { fence: held.fence }],
      ['spawn', { fence: held.fence, subtasks: [{ key: 'k', type: 't' }] }],
    ] as const) {
      await refusedUnchanged(403, 'FORBIDDEN', () => call('POST', `/api/tasks/${held.id}/${path}`, { token: a2, body }));
    }
    // The holder still completes it.
    expect((await call('POST', `/api/tasks/${held.id}/complete`, { token: a1, body: { fence: held.fence, output: 'mine' } })).body.completed).toBe(true);
  });

  it('a stale fencing token is a 409 for the agent and for an admin alike; nothing changes', async () => {
    await submit();
    const a1 = await agentUp('a1');
    const held = await claimOne('a1', a1);
    await refusedUnchanged(409, 'LEASE_LOST', () => call('POST', `/api/tasks/${held.id}/complete`, { token: a1, body: { fence: held.fence - 1, output: 1 } }));
    await refusedUnchanged(409, 'LEASE_LOST', () => call('POST', `/api/tasks/${held.id}/complete`, { body: { fence: held.fence + 1, output: 1 } }));
    // The task is released (an agent shutting down): the old fence is dead from then on.
    expect((await call('POST', `/api/tasks/${held.id}/release`, { token: a1, body: { fence: held.fence, reason: 'shutdown' } })).body).toEqual({ ok: true });
    await refusedUnchanged(409, 'LEASE_LOST', () => call('POST', `/api/tasks/${held.id}/complete`, { token: a1, body: { fence: held.fence, output: 1 } }));
    await refusedUnchanged(409, 'LEASE_LOST', () => call('POST', `/api/tasks/${held.id}/start`, { body: { fence: held.fence } }));
  });

  it('an agent drains (claims nothing), deregisters (offline), and is active again when it registers', async () => {
    await submit();
    const a1 = await agentUp('a1');
    expect((await call('POST', '/api/agents/a1/drain', { token: a1 })).body).toEqual({ ok: true });
    expect((await call('POST', '/api/agents/a1/claim', { token: a1, body: {} })).body.tasks).toEqual([]);
    expect((await call('POST', '/api/agents/a1/deregister', { token: a1 })).status).toBe(200);
    expect((await call('GET', '/api/agents')).body.agents[0].status).toBe('offline');
    await refusedUnchanged(403, 'FORBIDDEN', () => call('POST', '/api/agents/a2/drain', { token: a1 }));
    await refusedUnchanged(404, 'NOT_FOUND', () => call('POST', '/api/agents/ghost/drain', {}));
    await agentUp('a1');
    expect((await call('POST', '/api/agents/a1/claim', { token: a1, body: {} })).body.tasks).toHaveLength(1);
  });

  it('after its lease was taken back and the task claimed again, the old holder hears 409 LEASE_LOST; the new holder carries on', async () => {
    await submit();
    const a1 = await agentUp('a1');
    const a2 = await agentUp('a2');
    const old = await claimOne('a1', a1);
    await rowsOf(db, sql`update tasks set status = 'ready', claimed_by = null where id = ${old.id}`); // as the reaper would, after a retry
    const now = await claimOne('a2', a2);
    expect(now.fence).toBe(old.fence + 1);
    await refusedUnchanged(409, 'LEASE_LOST', () => call('POST', `/api/tasks/${old.id}/heartbeat`, { token: a1, body: { fence: old.fence } }));
    await refusedUnchanged(403, 'FORBIDDEN', () => call('POST', `/api/tasks/${old.id}/heartbeat`, { token: a1, body: { fence: now.fence } }));
    expect((await call('POST', `/api/tasks/${now.id}/complete`, { token: a2, body: { fence: now.fence, output: 1 } })).body.completed).toBe(true);
  });

  it('bad agent bodies are 400s naming the field; unknown tasks and agents are 404s', async () => {
    const a1 = await agentUp('a1');
    const r = await refusedUnchanged(400, 'INVALID_INPUT', () => call('POST', '/api/agents', { token: a1, body: { id: 'a1', type: 'w', capabilities: ['Not Valid'] } }));
    expect(r.body.error.message).toMatch(/^body\.capabilities\.0: /);
    await refusedUnchanged(400, 'INVALID_INPUT', () => call('POST', '/api/agents/a1/claim', { token: a1, body: { limit: 0 } }));
    await refusedUnchanged(400, 'INVALID_INPUT', () => call('POST', '/api/tasks/tsk_x/complete', { token: a1, body: { output: 1 } }));
    await refusedUnchanged(400, 'INVALID_INPUT', () => call('POST', '/api/tasks/tsk_x/fail', { token: a1, body: { fence: 1, error_class: 'Bad Class', message: '' } }));
    await refusedUnchanged(404, 'NOT_FOUND', () => call('POST', '/api/tasks/tsk_x/complete', { token: a1, body: { fence: 1, output: 1 } }));
    await refusedUnchanged(404, 'NOT_FOUND', () => call('POST', '/api/agents/ghost/claim', { body: {} }));
    // A fence past PostgreSQL's integer, from an admin (who skips the holder check): a 400 naming it, not a 500.
    const big = await refusedUnchanged(400, 'INVALID_INPUT', () => call('POST', '/api/tasks/tsk_x/heartbeat', { body: { fence: 2 ** 31 } }));
    expect(big.body.error.message).toMatch(/^body\.fence: /);
  });

  it('a failure follows the retry policy; a non-retryable one dead-letters', async () => {
    const dagId = await submit();
    const a1 = await agentUp('a1');
    const plan = await claimOne('a1', a1);
    const retried = await call('POST', `/api/tasks/${plan.id}/fail`, { token: a1, body: { fence: plan.fence, error_class: 'rate_limit', message: 'slow down', retry_after_sec: 30 } });
    expect(retried.body.status).toBe('retrying');
    expect(new Date(retried.body.retryAt).getTime() - Date.now()).toBeGreaterThan(25_000);
    await rowsOf(db, sql`update tasks set status = 'ready', run_at = null where id = ${plan.id}`);
    const again = await claimOne('a1', a1);
    const dead = await call('POST', `/api/tasks/${again.id}/fail`, { token: a1, body: { fence: again.fence, error_class: 'auth_failure', message: 'no key', retryable: false } });
    expect(dead.body).toMatchObject({ status: 'dead_lettered', poisonPill: false });
    expect((await call('GET', `/api/dags/${dagId}`)).body.dag.status).toBe('blocked');
  });
});

describe('the dead-letter queue', () => {
  /** A DAG whose `build` task is dead-lettered by agent `agentId`; returns the DAG and the entry id. */
  async function deadLettered(agentId = 'a1', errorClass = 'crash', type = 'build'): Promise<{ dagId: string; entryId: string; taskId: string }> {
    const dagId = await submit(`name: dl\ntasks:\n  job: { type: ${type}, max_attempts: 1, spec: { prompt: old } }\n  after: { type: t, depends_on: [job] }\n`);
    const token = await http.agentToken(agentId);
    await call('POST', '/api/agents', { token, body: { id: agentId, type: 'w', capabilities: [] } });
    const claimed = await call('POST', `/api/agents/${agentId}/claim`, { token, body: { start: true, dag_id: dagId } });
    const t = claimed.body.tasks[0];
    const failed = await call('POST', `/api/tasks/${t.id}/fail`, { token, body: { fence: t.fence, error_class: errorClass, message: 'boom' } });
    return { dagId, entryId: failed.body.deadLetterId, taskId: t.id };
  }

  it('lists and shows entries with their failure history; an admin retries one and the DAG flows on', async () => {
    const { dagId, entryId, taskId } = await deadLettered();
    const list = await call('GET', '/api/dlq');
    expect(list.body.entries.map((e: { id: string }) => e.id)).toEqual([entryId]);
    const shown = await call('GET', `/api/dlq/${entryId}`);
    expect(shown.body.entry.history[0]).toMatchObject({ agent: 'a1', error_class: 'crash', error: 'boom' });
    const retried = await call('POST', `/api/dlq/${entryId}/retry`, { body: { note: 'flaky', reset_attempts: true } });
    expect(retried.body.entry).toMatchObject({ resolution: 'retried', resolvedNote: 'flaky' });
    expect(retried.body.entry.resolvedBy).toMatch(/^admin:/);
    expect((await taskStatusByKey(db, dagId)).job).toBe('ready');
    expect((await call('GET', `/api/dags/${dagId}`)).body.dag.status).toBe('running');
    await refusedUnchanged(409, 'DLQ_RESOLVED', () => call('POST', `/api/dlq/${entryId}/retry`, { body: {} }));
    await refusedUnchanged(404, 'NOT_FOUND', () => call('POST', '/api/dlq/dlq_missing/retry', { body: {} }));
    const a1 = await http.agentToken('a1');
    await refusedUnchanged(403, 'FORBIDDEN', () => call('POST', `/api/dlq/${entryId}/cancel`, { token: a1, body: {} }));
    expect(taskId).toMatch(/^tsk_/);
  });

  it('cancels an entry with a note: the task and its dependents are cancelled', async () => {
    const { dagId, entryId } = await deadLettered();
    const r = await call('POST', `/api/dlq/${entryId}/cancel`, { body: { note: 'obsolete' } });
    expect(r.body.entry).toMatchObject({ resolution: 'cancelled', resolvedNote: 'obsolete' });
    expect(await taskStatusByKey(db, dagId)).toEqual({ job: 'cancelled', after: 'cancelled' });
  });

  it('edits the task\'s spec, then retries it; a bad edit is a 400 and changes nothing', async () => {
    const { dagId, entryId, taskId } = await deadLettered();
    await refusedUnchanged(400, 'INVALID_INPUT', () => call('POST', `/api/dlq/${entryId}/edit-retry`, { body: { edit: { priority: 300 } } }));
    await refusedUnchanged(400, 'INVALID_INPUT', () => call('POST', `/api/dlq/${entryId}/edit-retry`, { body: { edit: { color: 'red' } } }));
    await refusedUnchanged(400, 'INVALID_INPUT', () => call('POST', `/api/dlq/${entryId}/edit-retry`, { body: { edit: {} } }));
    const r = await call('POST', `/api/dlq/${entryId}/edit-retry`, {
      body: { edit: { prompt: 'new', input: { retries: 'fewer' }, priority: 10, requires: ['gpu'], max_attempts: 4 }, note: 'clarified' },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const [t] = await rowsOf<{ status: string; spec: any; priority: number; required_capabilities: string[]; cap_key: string; max_attempts: number }>(db, sql`
      select status, spec, priority, required_capabilities, cap_key, max_attempts from tasks where id = ${taskId}`);
    expect(t).toMatchObject({ status: 'ready', priority: 10, required_capabilities: ['gpu'], cap_key: 'gpu', max_attempts: 4 });
    expect(t!.spec).toMatchObject({ prompt: 'new', input: { retries: 'fewer' } });
    const [ev] = await rowsOf<{ data: any }>(db, sql`select data from events where type = 'dlq.edited' and dag_id = ${dagId}`);
    expect(ev!.data.previous.spec.prompt).toBe('old');
    // Only an agent with the new capability gets it now.
    const a1 = await http.agentToken('a1');
    expect((await call('POST', '/api/agents/a1/claim', { token: a1, body: {} })).body.tasks).toEqual([]);
  });

  it('bulk retries and cancels the entries a filter selects, and needs a filter', async () => {
    const x1 = await deadLettered('a1', 'crash', 'build');
    const x2 = await deadLettered('a2', 'crash', 'lint');
    const y = await deadLettered('a1', 'timeout', 'build');
    await refusedUnchanged(400, 'INVALID_INPUT', () => call('POST', '/api/dlq/bulk', { body: { action: 'retry', filter: {} } }));
    await refusedUnchanged(400, 'INVALID_INPUT', () => call('POST', '/api/dlq/bulk', { body: { action: 'explode', filter: { type: 'build' } } }));
    const byClass = await call('POST', '/api/dlq/bulk', { body: { action: 'retry', filter: { error_class: 'crash' } } });
    expect(byClass.body.ids.sort()).toEqual([x1.entryId, x2.entryId].sort());
    expect((await taskStatusByKey(db, y.dagId)).job).toBe('dead_lettered');
    const byAgentType = await call('POST', '/api/dlq/bulk', { body: { action: 'cancel', filter: { agent_id: 'a1', type: 'build' }, note: 'bulk' } });
    expect(byAgentType.body.ids).toEqual([y.entryId]);
    expect((await taskStatusByKey(db, y.dagId)).job).toBe('cancelled');
    const none = await call('POST', '/api/dlq/bulk', { body: { action: 'cancel', filter: { dag_id: x1.dagId } } });
    expect(none.body.ids).toEqual([]);
  });
});

describe('agents, stats and metrics', () => {
  it('lists agents with capabilities and heartbeats; stats count tasks by status and tier', async () => {
    await submit();
    await agentUp('a1', ['llm']);
    const agents = await call('GET', '/api/agents');
    expect(agents.body.agents[0]).toMatchObject({ id: 'a1', capabilities: ['llm'], status: 'active' });
    const stats = await call('GET', '/api/stats');
    expect(stats.body.counts).toContainEqual({ status: 'ready', tier: 'normal', n: 1 });
  });

  it('serves Prometheus metrics: queue depth from the database, claims, waits and outcomes from this process', async () => {
    await submit();
    const a1 = await agentUp('a1');
    const t = await claimOne('a1', a1);
    await call('POST', `/api/tasks/${t.id}/complete`, { token: a1, body: { fence: t.fence, output: 1 } });
    const t2 = await claimOne('a1', a1);
    expect((await call('POST', `/api/tasks/${t2.id}/usage`, { token: a1, body: { fence: t2.fence, report_id: 'r1', cost_usd: 0.25, tokens_in: 100, tokens_out: 7 } })).status).toBe(200);
    // A cost its reporter could not price: counted apart, not as 0 USD.
    expect((await call('POST', `/api/tasks/${t2.id}/usage`, { token: a1, body: { fence: t2.fence, report_id: 'r2', cost_usd: null, tokens_in: 5 } })).status).toBe(200);
    await call('POST', `/api/tasks/${t2.id}/fail`, { token: a1, body: { fence: t2.fence, error_class: 'crash', message: 'x', retryable: false } });
    const m = await call('GET', '/metrics');
    expect(m.status).toBe(200);
    expect(m.headers.get('content-type')).toMatch(/text\/plain/);
    const text = m.body as string;
    const value = (line: string) => Number(text.split('\n').find((l) => l.startsWith(line))?.slice(line.length + 1));
    expect(value('dagent_tasks{status="completed",tier="normal"}')).toBe(1);
    expect(value('dagent_tasks{status="dead_lettered",tier="normal"}')).toBe(1);
    expect(value('dagent_tasks_completed_total{type="plan"}')).toBeGreaterThanOrEqual(1);
    expect(value(`dagent_tasks_dead_lettered_total{type="${t2.key}",reason="non_retryable"}`)).toBeGreaterThanOrEqual(1);
    expect(value(`dagent_task_failures_total{type="${t2.key}",error_class="crash",outcome="dead_lettered"}`)).toBeGreaterThanOrEqual(1);
    expect(value('dagent_task_wait_seconds_count{type="plan"}')).toBeGreaterThanOrEqual(1);
    expect(value('dagent_claims_total{result="claimed"}')).toBeGreaterThanOrEqual(2);
    // Usage reported while attempts ran, from the ledger, by model (this report named none).
    expect([value('dagent_usage_usd{model=""}'), value('dagent_usage_tokens{model="",direction="in"}'), value('dagent_usage_tokens{model="",direction="out"}')]).toEqual([0.25, 105, 7]);
    expect(value('dagent_usage_unpriced_reports{model=""}')).toBe(1);
    expect(text).toMatch(/^dagent_agent_heartbeat_age_seconds\{agent="a1",status="active"\} [\d.]+$/m);
    // By tenant: every DAG here is the default tenant's (one task still READY: the plan's dependent).
    expect([value('dagent_tenant_weight{tenant="default"}'), value('dagent_tenant_quota_waiting{tenant="default"}')]).toEqual([1, 0]);
    expect(value('dagent_tenant_tasks{tenant="default",state="held"}')).toBe(0);
    expect(value('dagent_tenant_tasks{tenant="default",state="ready"}')).toBe((await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from tasks where status = 'ready'`))[0]!.n);
    await refusedUnchanged(401, 'UNAUTHORIZED', () => call('GET', '/metrics', { token: null }));
  });
});

describe('the event stream', () => {
  it('sends a DAG\'s snapshot, then its tasks\' state changes and its events as they happen', async () => {
    const dagId = await submit();
    const ctl = new AbortController();
    const res = await fetch(`${http.url}/api/events?dag_id=${dagId}`, { headers: { authorization: `Bearer ${http.adminToken}` }, signal: ctl.signal });
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const reader = res.body!.getReader();
    const events: Array<{ event: string; data: any }> = [];
    let buf = '';
    const until = async (pred: () => boolean) => {
      const deadline = Date.now() + 15_000;
      while (!pred()) {
        if (Date.now() > deadline) throw new Error(`stream: timed out; got ${JSON.stringify(events.map((e) => e.event))}`);
        const { value, done } = await reader.read();
        if (done) throw new Error('stream ended');
        buf += new TextDecoder().decode(value);
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event && data) events.push({ event, data: JSON.parse(data) });
        }
      }
    };
    await until(() => events.some((e) => e.event === 'snapshot'));
    expect(events[0]!.data.tasks).toHaveLength(4);

    const a1 = await agentUp('a1');
    const t = await claimOne('a1', a1);
    await call('POST', `/api/tasks/${t.id}/complete`, { token: a1, body: { fence: t.fence, output: 1 } });
    await until(() => events.some((e) => e.event === 'task.status' && e.data.key === 'plan' && e.data.status === 'completed'));
    await until(() => events.some((e) => e.event === 'task.status' && e.data.key === 'build' && e.data.status === 'ready'));

    const b = await claimOne('a1', a1);
    await call('POST', `/api/tasks/${b.id}/fail`, { token: a1, body: { fence: b.fence, error_class: 'crash', message: 'x', retryable: false } });
    await until(() => events.some((e) => e.event === 'task.dead_lettered' && e.data.taskId === b.id));
    await until(() => events.some((e) => e.event === 'dag.blocked' && e.data.dagId === dagId));
    await until(() => events.some((e) => e.event === 'dag.progress' && e.data.status === 'blocked'));
    expect(events.every((e) => e.event === 'snapshot' || e.data.dagId === dagId)).toBe(true);
    ctl.abort();
    await reader.cancel().catch(() => {});
  });
});

describe('the OpenAPI document', () => {
  it('lists every route with its access and, where it takes one, the body schema generated from zod', async () => {
    const doc = (await call('GET', '/openapi.json', { token: null })).body;
    expect(doc.openapi).toBe('3.1.0');
    for (const r of routeRegistry) {
      const op = doc.paths[r.url.replace(/:([a-z_]+)/g, '{$1}')]?.[r.method.toLowerCase()];
      expect(op, `${r.method} ${r.url}`).toBeDefined();
      expect(op['x-dagent-access']).toBe(r.access);
    }
    const complete = doc.paths['/api/tasks/{id}/complete'].post;
    expect(complete.requestBody.content['application/json'].schema.required).toEqual(expect.arrayContaining(['fence']));
    expect(doc.paths['/api/dlq/bulk'].post.requestBody.content['application/json'].schema.properties.action.enum).toEqual(['retry', 'cancel']);
  });
});

describe('docs/openapi.json', () => {
  it('is what `dagent openapi` generates now (regenerate with npm run openapi)', async () => {
    const { readFileSync } = await import('node:fs');
    const cli = (await import('../helpers/cli.js')).cliWith(process.env);
    const r = await cli('openapi');
    expect(r.code).toBe(0);
    expect(JSON.parse(readFileSync('docs/openapi.json', 'utf8'))).toEqual(r.json());
    expect(r.json()).toEqual((await call('GET', '/openapi.json', { token: null })).body);
  });
});
