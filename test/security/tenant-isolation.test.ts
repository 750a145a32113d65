import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { cliWith } from '../helpers/cli.js';
import { dagSpec, databaseReset, databaseSnapshot, rowsOf } from '../helpers/factories.js';
import { tokenCreate, tokenList } from '../../src/auth/tokens.js';
import { InvalidInputError, NotFoundError } from '../../src/errors.js';
import { tenantCreate } from '../../src/engine/ops/tenants.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { streamWrite } from '../../src/engine/attempt/streams.js';

// Tokens scoped to tenants: for a token of tenant a, tenant b's DAGs, tasks and dead letters do not exist (the same
// 404 as an id nobody made, never a 403 that would confirm them), lists hold only a's, and an agent token's grant of
// tenants bounds what its agent serves. (The event stream, metrics, signals, MCP and webhooks: tenant-isolation-streams.)
const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });

beforeEach(async () => {
  await databaseReset(db);
  await tenantCreate(db, { id: 'a' });
  await tenantCreate(db, { id: 'b' });
});

const MISSING = { dag: 'dag_00000000000000', task: 'tsk_00000000000000', dlq: 'dlq_00000000000000' };

interface World { dagId: string; open: string; doomed: string; notes: string; signoff: string; dlq: string }

/**
 * A DAG in tenant `t`: `open` READY (nobody has its capability), `doomed` dead-lettered, `notes` completed after
 * writing to its stream, and `signoff` waiting for a person's approval of the notes.
 */
async function world(t: string): Promise<World> {
  const yaml = `name: ${t}-work
tasks:
  open: { type: t, spec: { constraints: { capabilities: [${t}-open] } } }
  doomed: { type: t, max_attempts: 1, spec: { constraints: { capabilities: [${t}-run] } } }
  notes: { type: t, spec: { constraints: { capabilities: [${t}-run] } } }
  signoff: { type: gate, depends_on: [notes], approval: { prompt: "Ship ${t}?" } }
`;
  const [r] = await dagSubmit(db, [await dagSpec(yaml)], { tenant: t });
  const dagId = r!.dagId;
  await agentRegister(db, { id: `${t}-runner`, type: 'test', capabilities: [`${t}-run`], maxConcurrent: 10, tenants: [t] });
  const held = await taskClaim(db, `${t}-runner`, { dagId, start: true, limit: 10 });
  expect(held.map((h) => h.key).sort()).toEqual(['doomed', 'notes']);
  for (const h of held) {
    if (h.key === 'doomed') {
      await taskFail(db, { taskId: h.id, fence: h.fence, errorClass: 'crash', message: `${t} boom`, retryable: false });
    } else {
      await streamWrite(db, { taskId: h.id, fence: h.fence }, { name: 'output', fromSeq: 1, chunks: [{ kind: 'text', data: `${t} secret draft` }] });
      await taskComplete(db, { taskId: h.id, fence: h.fence, output: { text: `${t} notes` } });
    }
  }
  const ids = Object.fromEntries((await rowsOf<{ key: string; id: string }>(db, sql`select key, id from tasks where dag_id = ${dagId}`)).map((x) => [x.key, x.id]));
  const [dl] = await rowsOf<{ id: string }>(db, sql`select id from dead_letters where dag_id = ${dagId} and resolution is null`);
  return { dagId, open: ids.open!, doomed: ids.doomed!, notes: ids.notes!, signoff: ids.signoff!, dlq: dl!.id };
}

interface Reply { status: number; body: any; text: string }

/** One request with a token; an event stream's body is not read (only that it opened). */
async function req(method: string, path: string, token: string, body?: unknown): Promise<Reply> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${http.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(15_000) });
  if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
    await res.body?.cancel();
    return { status: res.status, body: 'an event stream', text: 'an event stream' };
  }
  const text = await res.text();
  let parsed: unknown = text;
  try { parsed = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body: parsed, text };
}

/**
 * `path` (ID where the id goes) with another tenant's `foreign` id answers exactly what it answers for `missing`, an
 * id that exists nowhere: a 404 NOT_FOUND whose body differs only by the id. And it changed nothing.
 */
async function likeMissing(token: string, method: string, path: string, foreign: string, missing: string, body?: unknown): Promise<void> {
  const before = await databaseSnapshot(db);
  const none = await req(method, path.replace('ID', missing), token, body);
  // The request itself is well formed: for an id nobody made, it is the 404 (a check of this test, not of the feature).
  expect([none.status, none.body?.error?.code], `${method} ${path} with ${missing}: ${none.text}`).toEqual([404, 'NOT_FOUND']);
  const theirs = await req(method, path.replace('ID', foreign), token, body);
  expect.soft(theirs.status, `${method} ${path} with another tenant's ${foreign}: ${theirs.text.slice(0, 300)}`).toBe(404);
  expect.soft(theirs.text.replaceAll(foreign, 'ID'), `${method} ${path}: the body shows the object exists`).toBe(none.text.replaceAll(missing, 'ID'));
  expect.soft(await databaseSnapshot(db), `${method} ${path} with another tenant's ${foreign} changed something`).toBe(before);
}

const statusOf = async (taskId: string) => (await rowsOf<{ status: string; priority: number }>(db, sql`select status, priority from tasks where id = ${taskId}`))[0]!;
const dlqOpen = async (id: string) => (await rowsOf<{ open: boolean }>(db, sql`select resolution is null as open from dead_letters where id = ${id}`))[0]!.open;

describe('creating tenant-scoped tokens', () => {
  it('tokenCreate and `tokens create --tenants` keep the tenants, listed with each token (null: every tenant); an unknown tenant is refused naming it', async () => {
    const scoped = await tokenCreate(db, { role: 'read', name: 'a-viewer', tenants: ['a'] });
    expect(scoped.tenants).toEqual(['a']);
    const everywhere = await tokenCreate(db, { role: 'read', name: 'viewer' });
    expect(everywhere.tenants).toBeNull();
    const agent = await tokenCreate(db, { role: 'agent', agentId: 'two-tenants', capabilities: [], tenants: ['a', 'b'] });
    expect(agent.tenants).toEqual(['a', 'b']);
    const listed = await tokenList(db);
    expect(listed.find((t) => t.id === scoped.id)!.tenants).toEqual(['a']);
    expect(listed.find((t) => t.id === everywhere.id)!.tenants).toBeNull();

    const before = await databaseSnapshot(db);
    const err = await tokenCreate(db, { role: 'admin', tenants: ['a', 'ghost'] }).then(() => null, (e: unknown) => e);
    expect(err instanceof InvalidInputError || err instanceof NotFoundError, String(err)).toBe(true);
    expect((err as Error).message).toContain('ghost');
    expect(await databaseSnapshot(db)).toBe(before);

    const made = await cli('tokens', 'create', '--role', 'read', '--tenants', 'a,b', '--json');
    expect([made.code, made.stderr]).toEqual([0, '']);
    expect(made.json().tenants).toEqual(['a', 'b']);
    const rows = (await cli('tokens', 'list', '--json')).json() as Array<{ id: string; tenants: string[] | null }>;
    expect(rows.find((t) => t.id === made.json().id)!.tenants).toEqual(['a', 'b']);
    expect(rows.find((t) => t.id === everywhere.id)!.tenants).toBeNull();
    const unknown = await cli('tokens', 'create', '--role', 'read', '--tenants', 'a,ghost');
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain('ghost');
    expect((await cli('tokens', 'list', '--json')).json()).toHaveLength(rows.length);
  });
});

describe('a token scoped to tenant a reads only tenant a', () => {
  it('lists: DAGs, tasks, dead letters, approvals, costs, stats and the agents that may serve a', async () => {
    const A = await world('a');
    const B = await world('b');
    await agentRegister(db, { id: 'anywhere', type: 'test', capabilities: [], tenants: null });
    for (const dagId of [A.dagId, B.dagId]) expect((await http.call('POST', `/api/dags/${dagId}/budget`, { body: { usd: 10 } })).status).toBe(200);
    const { token } = await tokenCreate(db, { role: 'read', tenants: ['a'] });
    // What an unscoped token sees: both tenants (the fixture is what the scoped lists leave out).
    expect((await http.call('GET', '/api/dags')).body.dags.map((d: { id: string }) => d.id).sort()).toEqual([A.dagId, B.dagId].sort());

    const listed = async (path: string, field: string) => {
      const r = await req('GET', path, token);
      expect(r.status, `${path}: ${r.text.slice(0, 300)}`).toBe(200);
      return r.body[field] as Array<Record<string, any>>;
    };
    expect((await listed('/api/dags', 'dags')).map((d) => [d.id, d.tenantId])).toEqual([[A.dagId, 'a']]);
    const tasks = await listed('/api/tasks', 'tasks');
    expect(new Set(tasks.map((t) => t.dagId))).toEqual(new Set([A.dagId]));
    expect(tasks.map((t) => t.id)).toContain(A.open);
    expect((await listed('/api/tasks?status=ready', 'tasks')).map((t) => t.id)).toEqual([A.open]);
    expect((await listed('/api/dlq', 'entries')).map((e) => e.id)).toEqual([A.dlq]);
    // Filtered by b's DAG: nothing (an empty page, or the DAG's 404).
    const byB = await req('GET', `/api/dlq?dag_id=${B.dagId}`, token);
    expect(byB.status === 404 ? 'not found' : byB.body.entries, byB.text).toSatisfy((x: unknown) => x === 'not found' || (Array.isArray(x) && x.length === 0));
    expect((await listed('/api/approvals', 'approvals')).map((x) => x.taskId)).toEqual([A.signoff]);
    expect((await listed('/api/costs', 'dags')).map((d) => d.id)).toEqual([A.dagId]);

    const stats = (await req('GET', '/api/stats', token)).body;
    expect(stats.tenants.map((t: { id: string }) => t.id)).toEqual(['a']);
    const ofA = (await http.call('GET', '/api/stats?tenant=a')).body;
    expect(stats.counts).toEqual(ofA.counts);

    expect((await listed('/api/agents', 'agents')).map((x) => x.id).sort()).toEqual(['a-runner', 'anywhere']);
    // An agent that also serves other tenants spent partly for them: a's reader is not shown its spend; a's own agent's it is.
    await db.execute(sql`update agents set spent_usd = 7.5, day_spent_usd = 2.5, spend_day = (now() at time zone 'utc')::date where id in ('anywhere', 'a-runner')`);
    const spend = (rows: Array<Record<string, any>>, fields: string[]) => Object.fromEntries(rows.filter((x) => ['a-runner', 'anywhere'].includes(x.id)).map((x) => [x.id, fields.map((f) => x[f])]));
    expect(spend(await listed('/api/agents', 'agents'), ['spentUsd', 'reservedUsd', 'daySpentUsd'])).toEqual({ 'a-runner': [7.5, 0, 2.5], anywhere: [null, null, null] });
    expect(spend(await listed('/api/costs', 'agents'), ['spentUsd', 'reservedUsd'])).toEqual({ 'a-runner': [7.5, 0], anywhere: [null, null] });
    expect(spend((await req('GET', '/api/stats', token)).body.agents, ['spentUsd'])).toEqual({ 'a-runner': [7.5], anywhere: [null] });
    expect(spend((await http.call('GET', '/api/agents')).body.agents, ['spentUsd'])).toEqual({ 'a-runner': [7.5], anywhere: [7.5] });

    // The dashboard's tenant filter: an unscoped reader asks for one tenant's DAGs; a scoped one asking for another's gets none.
    const ofB = (await http.call('GET', '/api/dags?tenant=b')).body.dags as Array<{ id: string; tenantId: string }>;
    expect(ofB.length).toBeGreaterThan(0);
    expect(new Set(ofB.map((x) => x.tenantId))).toEqual(new Set(['b']));
    expect((await req('GET', '/api/dags?tenant=b', token)).body.dags).toEqual([]);
  });

  it('by id: another tenant\'s DAG, task, log, stream, steps, timeline, comparison and dead letter are a 404 like an id nobody made', async () => {
    const A = await world('a');
    const B = await world('b');
    const { token } = await tokenCreate(db, { role: 'read', tenants: ['a'] });
    // Its own tenant's are there.
    expect((await req('GET', `/api/dags/${A.dagId}`, token)).status).toBe(200);
    expect((await req('GET', `/api/tasks/${A.notes}`, token)).status).toBe(200);
    expect((await req('GET', `/api/dlq/${A.dlq}`, token)).status).toBe(200);

    for (const path of ['/api/dags/ID', '/api/dags/ID/timeline', `/api/dags/${A.dagId}/compare/ID`, `/api/dags/ID/compare/${A.dagId}`]) {
      await likeMissing(token, 'GET', path, B.dagId, MISSING.dag);
    }
    for (const path of ['/api/tasks/ID', '/api/tasks/ID/logs', '/api/tasks/ID/streams', '/api/tasks/ID/streams/output', '/api/tasks/ID/steps']) {
      await likeMissing(token, 'GET', path, B.notes, MISSING.task);
    }
    await likeMissing(token, 'GET', '/api/dlq/ID', B.dlq, MISSING.dlq);
  });
});

describe('an admin token scoped to tenant a acts only on tenant a', () => {
  it('every action on another tenant\'s DAG, task or dead letter is a 404 like an id nobody made, and leaves it as it was', async () => {
    const A = await world('a');
    const B = await world('b');
    const { token } = await tokenCreate(db, { role: 'admin', tenants: ['a'] });
    const dagBefore = (await rowsOf<{ status: string }>(db, sql`select status from dags where id = ${B.dagId}`))[0]!.status;
    const openBefore = await statusOf(B.open);

    for (const [path, body] of [
      ['/api/dags/ID/cancel', {}], ['/api/dags/ID/priority', { priority: 5 }], ['/api/dags/ID/budget', { usd: 3 }],
      ['/api/dags/ID/rerun', { from_failed: true }], ['/api/dags/ID/reruns', { model: 'openai/gpt-4o' }],
    ] as const) await likeMissing(token, 'POST', path, B.dagId, MISSING.dag, body);
    await likeMissing(token, 'POST', '/api/tasks/ID/cancel', B.open, MISSING.task, {});
    await likeMissing(token, 'POST', '/api/tasks/ID/priority', B.open, MISSING.task, { priority: 5 });
    await likeMissing(token, 'POST', '/api/tasks/ID/rerun', B.doomed, MISSING.task, {});
    await likeMissing(token, 'POST', '/api/tasks/ID/approve', B.signoff, MISSING.task, {});
    await likeMissing(token, 'POST', '/api/tasks/ID/reject', B.signoff, MISSING.task, { comment: 'not yours' });
    for (const [path, body] of [['/api/dlq/ID/retry', {}], ['/api/dlq/ID/cancel', {}], ['/api/dlq/ID/edit-retry', { edit: { priority: 5 } }]] as const) {
      await likeMissing(token, 'POST', path, B.dlq, MISSING.dlq, body);
    }

    // B's objects as they were: its DAG in the same state, its READY task at its priority, its dead letter open, its approval waiting.
    expect((await rowsOf<{ status: string }>(db, sql`select status from dags where id = ${B.dagId}`))[0]!.status).toBe(dagBefore);
    expect(await statusOf(B.open)).toEqual(openBefore);
    expect(await dlqOpen(B.dlq)).toBe(true);
    expect((await statusOf(B.signoff)).status).toBe('waiting');

    // On its own tenant's objects the same token acts.
    const prio = await req('POST', `/api/tasks/${A.open}/priority`, token, { priority: 7 });
    expect(prio.status, prio.text).toBe(200);
    expect((await statusOf(A.open)).priority).toBe(7);
    expect((await req('POST', `/api/dlq/${A.dlq}/retry`, token, {})).status).toBe(200);
    expect(await dlqOpen(A.dlq)).toBe(false);
  });

  it('POST /api/dlq/bulk resolves only its tenant\'s dead letters', async () => {
    const A = await world('a');
    const B = await world('b');
    const { token } = await tokenCreate(db, { role: 'admin', tenants: ['a'] });
    // Both tenants' dead letters match the filter (their tasks are of type t).
    const r = await req('POST', '/api/dlq/bulk', token, { action: 'cancel', filter: { type: 't' }, note: 'cleanup' });
    expect(r.status, r.text).toBe(200);
    expect(await dlqOpen(A.dlq)).toBe(false);
    expect(await dlqOpen(B.dlq)).toBe(true);
    expect((await statusOf(B.doomed)).status).toBe('dead_lettered');
    // Asked by B's DAG, it finds nothing to do either.
    await req('POST', '/api/dlq/bulk', token, { action: 'retry', filter: { dag_id: B.dagId } });
    expect(await dlqOpen(B.dlq)).toBe(true);
  });
});

describe('submitting with a scoped token', () => {
  const DAG = 'name: scoped-submit\ntasks:\n  x: { type: t, spec: { constraints: { capabilities: [nobody] } } }\n';
  const post = (token: string, query = '') => fetch(`${http.url}/api/dags${query}`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/yaml' }, body: DAG,
  }).then(async (res) => ({ status: res.status, body: await res.json() as any }));

  it('a DAG without a tenant goes into the token\'s; into another tenant is refused as into one that does not exist, and nothing is written', async () => {
    const { token } = await tokenCreate(db, { role: 'submit', tenants: ['a'] });
    const made = await post(token);
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const dagId = made.body.results[0].dagId;
    expect(await rowsOf(db, sql`select tenant_id from dags where id = ${dagId}`)).toEqual([{ tenant_id: 'a' }]);
    expect(await rowsOf(db, sql`select distinct tenant_id from tasks where dag_id = ${dagId}`)).toEqual([{ tenant_id: 'a' }]);
    expect((await post(token, '?tenant=a')).status).toBe(201);

    const before = await databaseSnapshot(db);
    const other = await post(token, '?tenant=b');
    const nobody = await post(token, '?tenant=nobody');
    expect(nobody.status, JSON.stringify(nobody.body)).toBe(400);
    expect(nobody.body.error.message).toMatch(/tenant "nobody" does not exist/);
    expect([other.status, JSON.stringify(other.body)]).toEqual([nobody.status, JSON.stringify(nobody.body).replaceAll('nobody', 'b')]);
    expect(await databaseSnapshot(db)).toBe(before);
  });
});

describe('deployment-wide settings need an unscoped token', () => {
  it('rate limits: a scoped admin cannot declare or remove one, a scoped reader cannot list them (403), and nothing changes', async () => {
    expect((await http.call('PUT', '/api/rate-limits/openai', { body: { requests: 100 } })).status).toBe(200);
    const { token: admin } = await tokenCreate(db, { role: 'admin', tenants: ['a'] });
    const { token: read } = await tokenCreate(db, { role: 'read', tenants: ['a'] });
    const before = await databaseSnapshot(db);
    for (const [method, path, token, body] of [
      ['PUT', '/api/rate-limits/openai', admin, { requests: 1 }], ['PUT', '/api/rate-limits/anthropic', admin, { requests: 1 }],
      ['DELETE', '/api/rate-limits/openai', admin, undefined], ['GET', '/api/rate-limits', read, undefined], ['GET', '/api/rate-limits', admin, undefined],
    ] as const) {
      const r = await req(method, path, token, body);
      expect.soft([r.status, r.body?.error?.code], `${method} ${path}: ${r.text.slice(0, 200)}`).toEqual([403, 'FORBIDDEN']);
    }
    expect(await databaseSnapshot(db)).toBe(before);
  });
});

describe('an agent token granted tenants', () => {
  const register = (token: string, extra: Record<string, unknown> = {}) =>
    req('POST', '/api/agents', token, { id: 'scoped-worker', type: 'w', capabilities: ['iso'], max_concurrent: 10, ...extra });
  const submit = async (tenant: string, n: number) => {
    const tasks = Array.from({ length: n }, (_, i) => `  t${i}: { type: t, spec: { constraints: { capabilities: [iso] } } }`).join('\n');
    return (await dagSubmit(db, [await dagSpec(`name: ${tenant}-iso\ntasks:\n${tasks}\n`)], { tenant }))[0]!.dagId;
  };
  const claim = async (token: string) => {
    const r = await req('POST', '/api/agents/scoped-worker/claim', token, { limit: 10 });
    expect(r.status, r.text).toBe(200);
    return r.body.tasks as Array<{ id: string }>;
  };

  it('cannot register its agent for another tenant (403); registered without tenants it serves its grant\'s, and never claims another tenant\'s work', async () => {
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'scoped-worker', capabilities: ['iso'], tenants: ['a'] });
    for (const tenants of [['b'], ['a', 'b']]) {
      const before = await databaseSnapshot(db);
      const r = await register(token, { tenants });
      expect([r.status, r.body?.error?.code], r.text).toEqual([403, 'FORBIDDEN']);
      expect(r.body.error.message).toMatch(/tenants? .*\bb\b/);
      expect(await databaseSnapshot(db)).toBe(before);
    }
    const ok = await register(token);
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body.agent.tenants).toEqual(['a']);
    const listed = (await http.call('GET', '/api/agents')).body.agents.find((x: { id: string }) => x.id === 'scoped-worker');
    expect(listed.tenants).toEqual(['a']);

    // Only tenant b has READY work for it: the claim takes none of it.
    const dagB = await submit('b', 3);
    expect(await claim(token)).toEqual([]);
    expect(await rowsOf(db, sql`select distinct status from tasks where dag_id = ${dagB}`)).toEqual([{ status: 'ready' }]);
    // Its own tenant's, yes.
    const dagA = await submit('a', 2);
    const got = await claim(token);
    expect(got).toHaveLength(2);
    expect(await rowsOf(db, sql`select distinct dag_id from tasks where id = any(string_to_array(${got.map((t) => t.id).join(',')}, ','))`)).toEqual([{ dag_id: dagA }]);
  });

  it('a claim stays within the granted tenants even when the agent\'s row says every tenant (an admin\'s registration)', async () => {
    expect((await http.call('POST', '/api/agents', { body: { id: 'scoped-worker', type: 'w', capabilities: ['iso'], max_concurrent: 10 } })).status).toBe(201);
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'scoped-worker', capabilities: ['iso'], tenants: ['a'] });
    const dagB = await submit('b', 3);
    // The claim statement keeps to the token's tenants, whatever the row says: none of b's.
    expect(await claim(token)).toEqual([]);
    expect(await rowsOf(db, sql`select distinct status from tasks where dag_id = ${dagB}`)).toEqual([{ status: 'ready' }]);
    const dagA = await submit('a', 2);
    expect(await claim(token)).toHaveLength(2);
    expect(await rowsOf(db, sql`select count(*)::int as n from tasks where dag_id = ${dagA} and claimed_by = 'scoped-worker'`)).toEqual([{ n: 2 }]);
  });

  it('its reports on another tenant\'s task are a 404 like a task nobody made, not a fence refusal that shows the task', async () => {
    const B = await world('b');
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'scoped-worker', capabilities: ['iso'], tenants: ['a'] });
    await likeMissing(token, 'POST', '/api/tasks/ID/heartbeat', B.open, MISSING.task, { fence: 0 });
    await likeMissing(token, 'POST', '/api/tasks/ID/complete', B.open, MISSING.task, { fence: 0, output: {} });
    await likeMissing(token, 'GET', '/api/tasks/ID/steps?fence=0', B.notes, MISSING.task);
  });
});

describe('what a scoped token sends wrong is answered alike for any id', () => {
  it('a bad body or query, or a step by name, answers the same for another tenant\'s object as for one nobody made', async () => {
    const B = await world('b');
    const { token } = await tokenCreate(db, { role: 'admin', tenants: ['a'] });
    for (const [method, path, foreign, missing, body] of [
      ['GET', '/api/tasks/ID/logs?attempt=0', B.notes, MISSING.task, undefined],
      ['POST', '/api/tasks/ID/priority', B.open, MISSING.task, { priority: 999 }],
      ['POST', '/api/dags/ID/budget', B.dagId, MISSING.dag, { usd: -1 }],
      ['GET', '/api/tasks/ID/steps/plan', B.notes, MISSING.task, undefined],
      // A check the engine makes before its own lookup (a rerun's `set` fields) comes after the reach: 404 for both.
      ['POST', '/api/dags/ID/reruns', B.dagId, MISSING.dag, { set: { 'notes.no_such_field': 'x' } }],
    ] as const) {
      const none = await req(method, path.replace('ID', missing), token, body);
      const theirs = await req(method, path.replace('ID', foreign), token, body);
      expect.soft([theirs.status, theirs.text.replaceAll(foreign, 'ID')], `${method} ${path}`).toEqual([none.status, none.text.replaceAll(missing, 'ID')]);
    }
    // A comparison of a DAG nobody made with another tenant's names the one nobody made, as with two nobody made.
    const both = await req('GET', `/api/dags/${MISSING.dag}/compare/${B.dagId}`, token);
    expect([both.status, both.text.includes(B.dagId)], both.text).toEqual([404, false]);
  });
});
