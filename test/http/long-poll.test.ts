import { beforeEach, describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { READY_CHANNEL } from '../../src/db/statement.js';
import { readyHintParse } from '../../src/db/queries/ready-hint.js';
import { agentCreate, dagCreate, dagSpec, databaseReset, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { tenantCreate } from '../../src/engine/ops/tenants.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { dlqBulk } from '../../src/engine/ops/dlq.js';
import { tokenRevoke } from '../../src/auth/tokens.js';
import { eventually } from '../helpers/wait.js';
import { CLAIM_WAIT_DEFAULTS } from '../../src/config/index.js';
import { agentMarkStaleOffline } from '../../src/db/queries/agents.js';

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
beforeEach(() => databaseReset(db));

/** A figure of this server's /metrics (0 when absent). */
async function metric(name: string, labels = ''): Promise<number> {
  const r = await http.call('GET', '/metrics');
  const line = (r.body as string).split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `));
  return line ? Number(line.split(' ')[1]) : 0;
}
const claims = async () => ({ empty: await metric('dagent_claims_total', 'result="empty"'), claimed: await metric('dagent_claims_total', 'result="claimed"') });

async function agent(id: string, capabilities: string[]): Promise<string> {
  const token = await http.agentToken(id, capabilities);
  expect((await http.call('POST', '/api/agents', { token, body: { id, type: 'w', capabilities, max_concurrent: 8 } })).status).toBe(201);
  return token;
}

function longPoll(id: string, token: string, waitSec: number, signal?: AbortSignal) {
  return fetch(`${http.url}/api/agents/${id}/claim`, {
    method: 'POST', signal, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ wait_sec: waitSec }),
  }).then(async (r) => ({ status: r.status, tasks: ((await r.json()) as { tasks: Array<{ key: string }> }).tasks }));
}

const waiting = (n: number) => eventually(`${n} claims waiting`, async () => (await metric('dagent_claims_waiting')) === n);

describe('long-poll claims (wait_sec)', () => {
  it('wait for READY work the agent can take, and claim only when it comes: work for others wakes only them', async () => {
    const shellToken = await agent('lp-shell', ['shell']);
    const gpuToken = await agent('lp-gpu', ['gpu']);
    const before = await claims();
    const shell = longPoll('lp-shell', shellToken, 25);
    const gpu = longPoll('lp-gpu', gpuToken, 25);
    await waiting(2);
    await dagCreate(db, 'name: g\ntasks:\n  train: { type: w, spec: { constraints: { capabilities: [gpu] } } }\n');
    const g = await gpu;
    expect(g.tasks.map((t) => t.key)).toEqual(['train']);
    // The gpu task's hint went by the shell agent's claim without waking it: still waiting, no claim statement run.
    expect(await metric('dagent_claims_waiting')).toBe(1);
    await dagCreate(db, 'name: s\ntasks:\n  build: { type: w, spec: { constraints: { capabilities: [shell] } } }\n');
    const s = await shell;
    expect(s.tasks.map((t) => t.key)).toEqual(['build']);
    const after = await claims();
    // One empty claim each, when they came in; then one claim each, when their work came.
    expect(after.empty - before.empty).toBe(2);
    expect(after.claimed - before.claimed).toBe(2);
  });

  it('work of a tenant an agent does not serve does not wake it: the hint names the tenant', async () => {
    await tenantCreate(db, { id: 'team-a' });
    await tenantCreate(db, { id: 'team-b' });
    const tokens: Record<string, string> = {};
    for (const t of ['team-a', 'team-b']) {
      tokens[t] = await http.agentToken(`lp-${t}`, ['shell']);
      expect((await http.call('POST', '/api/agents', { token: tokens[t], body: { id: `lp-${t}`, type: 'w', capabilities: ['shell'], max_concurrent: 8, tenants: [t] } })).status).toBe(201);
    }
    const before = await claims();
    const a = longPoll('lp-team-a', tokens['team-a']!, 25);
    const b = longPoll('lp-team-b', tokens['team-b']!, 25);
    await waiting(2);
    await dagSubmit(db, [await dagSpec('name: b\ntasks:\n  build: { type: w, spec: { constraints: { capabilities: [shell] } } }\n')], { tenant: 'team-b' });
    expect((await b).tasks.map((t) => t.key)).toEqual(['build']);
    // team-a's agent heard the hint go by without a claim: still waiting, and only the two first empty claims ran.
    expect(await metric('dagent_claims_waiting')).toBe(1);
    const after = await claims();
    expect([after.empty - before.empty, after.claimed - before.claimed]).toEqual([2, 1]);
    await dagSubmit(db, [await dagSpec('name: a\ntasks:\n  test: { type: w, spec: { constraints: { capabilities: [shell] } } }\n')], { tenant: 'team-a' });
    expect((await a).tasks.map((t) => t.key)).toEqual(['test']);
  });

  it('one READY task wakes one of several waiting agents; the others time out without another claim', async () => {
    const ids = ['lp-a', 'lp-b', 'lp-c'];
    const tokens = await Promise.all(ids.map((id) => agent(id, ['shell'])));
    const polls = ids.map((id, i) => longPoll(id, tokens[i]!, 3));
    await waiting(3);
    // Counted from here: each poll's first claim (if it ran one) is behind it.
    const before = await claims();
    await dagCreate(db, 'name: one\ntasks:\n  only: { type: w, spec: { constraints: { capabilities: [shell] } } }\n');
    const answers = await Promise.all(polls);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(answers.flatMap((a) => a.tasks.map((t) => t.key))).toEqual(['only']);
    const after = await claims();
    expect(after.empty - before.empty).toBe(0);
    expect(after.claimed - before.claimed).toBe(1);
  });

  it('a woken agent that cannot take the task (at its max_concurrent) hands its turn to the next waiting agent', async () => {
    const fullToken = await http.agentToken('lp-full', ['shell']);
    await http.call('POST', '/api/agents', { token: fullToken, body: { id: 'lp-full', type: 'w', capabilities: ['shell'], max_concurrent: 1 } });
    const nextToken = await agent('lp-next', ['shell']);
    await dagCreate(db, 'name: held\ntasks:\n  held: { type: w, spec: { constraints: { capabilities: [shell] } } }\n');
    expect((await http.call('POST', '/api/agents/lp-full/claim', { token: fullToken, body: {} })).body.tasks).toHaveLength(1);
    const full = longPoll('lp-full', fullToken, 3);
    await waiting(1);
    const next = longPoll('lp-next', nextToken, 25);
    await waiting(2);
    const before = await claims();
    await dagCreate(db, 'name: more\ntasks:\n  more: { type: w, spec: { constraints: { capabilities: [shell] } } }\n');
    // The first in line is woken first, claims nothing, and passes the hint on: the next one claims at once.
    expect((await next).tasks.map((t) => t.key)).toEqual(['more']);
    expect((await full).tasks).toEqual([]);
    const after = await claims();
    expect(after.claimed - before.claimed).toBe(1);
    expect(after.empty - before.empty).toBe(1);
  });

  it('a long poll renewed while nothing is READY for its agent runs no claim statement; the work that comes is claimed at once', async () => {
    const token = await agent('lp-idle', ['lint']);
    const other = await agent('lp-idle-gpu', ['gpu']);
    const before = await claims();
    // The first poll claims, finds nothing, and its probe finds nothing READY for [lint] (a reach no test before noted): the node notes it.
    expect((await longPoll('lp-idle', token, 0.3)).tasks).toEqual([]);
    // Renewed polls wait without a claim, also after work for another reach came and went (its hint covers only gpu).
    expect((await longPoll('lp-idle', token, 0.3)).tasks).toEqual([]);
    await dagCreate(db, 'name: g\ntasks:\n  train: { type: w, spec: { constraints: { capabilities: [gpu] } } }\n');
    expect((await longPoll('lp-idle-gpu', other, 5)).tasks.map((t) => t.key)).toEqual(['train']);
    expect((await longPoll('lp-idle', token, 0.3)).tasks).toEqual([]);
    const idle = await claims();
    expect([idle.empty - before.empty, idle.claimed - before.claimed]).toEqual([1, 1]);
    const poll = longPoll('lp-idle', token, 25);
    await waiting(1);
    await dagCreate(db, 'name: s\ntasks:\n  build: { type: w, spec: { constraints: { capabilities: [lint] } } }\n');
    expect((await poll).tasks.map((t) => t.key)).toEqual(['build']);
    // Work already READY when a poll comes in (its hint came while no one waited) is claimed by the poll's first claim.
    await dagCreate(db, 'name: s2\ntasks:\n  again: { type: w, spec: { constraints: { capabilities: [lint] } } }\n');
    expect((await longPoll('lp-idle', token, 5)).tasks.map((t) => t.key)).toEqual(['again']);
    const after = await claims();
    expect([after.empty - before.empty, after.claimed - before.claimed]).toEqual([1, 3]);
  });

  it('a woken claim that takes a more urgent task of another group hands the hint on to an agent for the first', async () => {
    const wideToken = await agent('lp-wide', ['x']);
    const plainToken = await agent('lp-plain', []);
    const wide = longPoll('lp-wide', wideToken, 25);
    await waiting(1);
    const plain = longPoll('lp-plain', plainToken, 25);
    await waiting(2);
    // One statement makes both READY; hints go out in key order, so the plain group's ('') comes first and wakes
    // lp-wide (first in line, and it covers it too), whose claim takes the more urgent x task. The x hint found no
    // one else to wake. The plain task is still READY, so lp-wide's turn goes on to lp-plain.
    await dagCreate(db, 'name: mixed\ntasks:\n  plain: { type: w, priority: 60 }\n  urgent: { type: w, priority: 10, spec: { constraints: { capabilities: [x] } } }\n');
    expect((await wide).tasks.map((t) => t.key)).toEqual(['urgent']);
    expect((await plain).tasks.map((t) => t.key)).toEqual(['plain']);
  });

  it('READY work held back by a concurrency key is claimed again when the key frees, though no hint announces it', async () => {
    const holderToken = await agent('lp-holder', ['shell']);
    const nextToken = await agent('lp-keyed', ['shell']);
    await dagCreate(db, 'name: keyed\nconcurrency: { key: repo, limit: 1 }\ntasks:\n  k1: { type: w, priority: 10, spec: { constraints: { capabilities: [shell] } } }\n  k2: { type: w, spec: { constraints: { capabilities: [shell] } } }\n');
    const [held] = (await http.call('POST', '/api/agents/lp-holder/claim', { token: holderToken, body: { start: true } })).body.tasks;
    expect(held.key).toBe('k1');
    const keyed = longPoll('lp-keyed', nextToken, 25);
    await waiting(1);
    expect((await http.call('POST', `/api/tasks/${held.id}/complete`, { token: holderToken, body: { fence: held.fence, output: 1 } })).status).toBe(200);
    expect((await keyed).tasks.map((t) => t.key)).toEqual(['k2']);
  });

  it('a token revoked while its claim waits claims nothing more', async () => {
    const token = await agent('lp-revoked', ['shell']);
    const poll = longPoll('lp-revoked', token, 25);
    await waiting(1);
    const [row] = await rowsOf<{ id: string }>(db, sql`select id from api_tokens where agent_id = 'lp-revoked' and revoked_at is null`);
    await tokenRevoke(db, row!.id);
    await dagCreate(db, 'name: after\ntasks:\n  t: { type: w, spec: { constraints: { capabilities: [shell] } } }\n');
    expect((await poll).tasks).toEqual([]);
    expect(await taskStatusByKey(db, (await rowsOf<{ id: string }>(db, sql`select id from dags where name = 'after'`))[0]!.id)).toEqual({ t: 'ready' });
  });

  it('a bulk dead-letter retry, one transaction making one group READY entry by entry, sends a hint per task (none folded)', async () => {
    await agentCreate(db, 'lp-breaker', ['shell']);
    const dagId = await dagCreate(db, `name: broken\ntasks:\n${[1, 2, 3].map((i) => `  b${i}: { type: w, max_attempts: 1, spec: { constraints: { capabilities: [shell] } } }`).join('\n')}\n`);
    for (const t of await taskClaim(db, 'lp-breaker', { limit: 3 })) {
      await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'crash', message: 'broke', retryable: false });
    }
    expect(Object.values(await taskStatusByKey(db, dagId))).toEqual(['dead_lettered', 'dead_lettered', 'dead_lettered']);
    const listener = new pg.Client({ connectionString: database.sessionUrl });
    await listener.connect();
    try {
      const heard: string[] = [];
      listener.on('notification', (n) => { if (n.channel === READY_CHANNEL) heard.push(n.payload ?? ''); });
      await listener.query(`listen ${READY_CHANNEL}`);
      expect((await dlqBulk(db, { dagId }, 'retry')).ids).toHaveLength(3);
      // Three statements of one transaction, three hints of the same group: PostgreSQL folds identical payloads into one.
      await eventually('three hints', async () => heard.length >= 3);
      expect(heard.map((h) => readyHintParse(h))).toEqual([1, 2, 3].map(() => ({ count: 1, group: { key: 'shell', capabilities: ['shell'], models: [], tenant: 'default' } })));
    } finally {
      await listener.end();
    }
  });

  it('a client that hangs up stops waiting', async () => {
    const token = await agent('lp-gone', ['shell']);
    const gone = new AbortController();
    const poll = longPoll('lp-gone', token, 25, gone.signal).catch((e: Error) => e);
    await waiting(1);
    gone.abort();
    expect(await poll).toBeInstanceOf(Error);
    await waiting(0);
  });

  it(`an agent keeps at most ${CLAIM_WAIT_DEFAULTS.waitingPerAgent} claims waiting; one more answers at once`, async () => {
    const token = await agent('lp-many', ['shell']);
    const n = CLAIM_WAIT_DEFAULTS.waitingPerAgent;
    const polls = Array.from({ length: n }, () => longPoll('lp-many', token, 25));
    await waiting(n);
    const extra = await longPoll('lp-many', token, 25);
    expect(extra).toEqual({ status: 200, tasks: [] });
    expect(await metric('dagent_claims_waiting')).toBe(n);
    await dagCreate(db, `name: n\ntasks:\n${Array.from({ length: n }, (_, i) => `  t${i}: { type: w, spec: { constraints: { capabilities: [shell] } } }`).join('\n')}\n`);
    expect((await Promise.all(polls)).flatMap((p) => p.tasks).length).toBe(n);
  });

  it('refuses a wait longer than the ceiling, naming the field, and claims nothing', async () => {
    const token = await agent('lp-long', ['shell']);
    await dagCreate(db, 'name: x\ntasks:\n  t: { type: w, spec: { constraints: { capabilities: [shell] } } }\n');
    const r = await http.call('POST', '/api/agents/lp-long/claim', { token, body: { wait_sec: CLAIM_WAIT_DEFAULTS.waitMaxSec + 1 } });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(/wait_sec/);
    expect((await http.call('POST', '/api/agents/lp-long/claim', { token, body: {} })).body.tasks).toHaveLength(1);
  });

  it('a long poll is a sign of life: an agent that only long-polls is not marked offline; one marked offline stays so', async () => {
    const token = await agent('lp-alive', ['shell']);
    const quiet = await agent('lp-quiet', ['shell']);
    // Both last heard of 80 s ago, close to the 90 s after which the reaper marks an agent offline.
    await rowsOf(db, sql`update agents set heartbeat_at = now() - interval '80 seconds' where id in ('lp-alive', 'lp-quiet')`);
    expect((await longPoll('lp-alive', token, 0.2)).status).toBe(200);
    const stale = await agentMarkStaleOffline(db, 79);
    expect(stale).toEqual(['lp-quiet']);
    const [alive] = await rowsOf<{ status: string; silent: number }>(db, sql`
      select status, extract(epoch from now() - heartbeat_at)::float8 as silent from agents where id = 'lp-alive'`);
    expect(alive!.status).toBe('active');
    expect(alive!.silent).toBeLessThan(10);
    // Offline (silent, or signed off) is left to a heartbeat or a registration: a claim does not bring it back.
    expect((await longPoll('lp-quiet', quiet, 0.2)).tasks).toEqual([]);
    expect((await rowsOf<{ status: string }>(db, sql`select status from agents where id = 'lp-quiet'`))[0]!.status).toBe('offline');
  });
});

describe('a node stopping while claims wait', () => {
  it('answers every waiting claim with nothing, claims nothing more for them, and closes without waiting out their wait_sec', async () => {
    const { httpServerCreate } = await import('../../src/http/server.js');
    const { pino } = await import('pino');
    const node = await httpServerCreate({ db, databaseUrl: database.sessionUrl, log: pino({ level: 'silent' }) });
    const url = await node.listen(0, '127.0.0.1');
    const token = await agent('stopping-1', ['shell']);
    const polls = Array.from({ length: 3 }, () => fetch(`${url}/api/agents/stopping-1/claim`, {
      method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ wait_sec: 30 }),
    }).then(async (r) => ({ status: r.status, tasks: ((await r.json()) as { tasks: unknown[] }).tasks })));
    await eventually('3 claims waiting', async () => /^dagent_claims_waiting 3$/m.test(await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${http.adminToken}` } })).text()));
    const before = await claims();
    const startedAt = Date.now();
    await node.close();
    expect(await Promise.all(polls)).toEqual([{ status: 200, tasks: [] }, { status: 200, tasks: [] }, { status: 200, tasks: [] }]);
    // Before, a stopped wait went straight back to waiting, which now returned at once: each claim spun, asking the
    // database whether work was READY, until its 30 s were up, and the node's close waited for them.
    expect(Date.now() - startedAt).toBeLessThan(CLAIM_WAIT_DEFAULTS.waitMaxSec * 1000 / 3);
    expect((await claims()).empty).toBe(before.empty);
  });
});
