import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { databaseSnapshot, rowsOf } from '../helpers/factories.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { refused, serverStart, type Reply } from './helpers/server.js';

// Finding 3 (first half): an agent registered itself with a validator capability and claimed
// the validation task of its own output. Capabilities now come from the token's grant,
// validator capabilities from a separate grant; tokens carry roles (admin, submit, read, agent).
const database = await testDatabase();
const { db } = database;
const server = await serverStart(database);

async function unchanged(r: () => Promise<Reply>, status: number, code: string, why?: RegExp): Promise<Reply> {
  const before = await databaseSnapshot(db);
  const reply = await refused(status, code, r(), why);
  expect(await databaseSnapshot(db)).toBe(before);
  return reply;
}

const register = (token: string, id: string, capabilities: string[], extra: Record<string, unknown> = {}) =>
  server.call('POST', '/api/agents', { token, body: { id, type: 'w', capabilities, ...extra } });

describe('capabilities are granted, not claimed', () => {
  it('an agent token cannot register a validator capability it was not granted, nor any capability beyond its grant', async () => {
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'writer', capabilities: ['write'] });
    await unchanged(() => register(token, 'writer', ['write', 'validate:test']), 403, 'FORBIDDEN', /does not grant validate:test \(validator capabilities are a separate grant/);
    await unchanged(() => register(token, 'writer', ['write', 'shell']), 403, 'FORBIDDEN', /does not grant shell/);
    expect((await register(token, 'writer', ['write'])).status).toBe(201);
  });

  it('validator capabilities come only from a validator grant', async () => {
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'tester', validators: ['test'] });
    expect((await register(token, 'tester', ['validate:test'])).status).toBe(201);
    await unchanged(() => register(token, 'tester', ['validate:judge']), 403, 'FORBIDDEN', /does not grant validate:judge/);
  });

  it('a budget above the grant\'s ceiling is refused; one left out is the ceiling', async () => {
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'spender', capabilities: ['llm'], budgetUsd: 5, maxConcurrent: 2 });
    await unchanged(() => register(token, 'spender', ['llm'], { budget_usd: 50 }), 403, 'FORBIDDEN', /a budget of at most 5 USD/);
    await unchanged(() => register(token, 'spender', ['llm'], { max_concurrent: 10 }), 403, 'FORBIDDEN', /at most 2 tasks at once/);
    const r = await register(token, 'spender', ['llm']);
    expect(r.status).toBe(201);
    expect(r.body.agent).toMatchObject({ budgetUsd: 5, maxConcurrent: 2 });
  });

  it('a token made before grants existed keeps working, but never registers a validator capability', async () => {
    const { id, token } = await tokenCreate(db, { role: 'agent', agentId: 'legacy' });
    await db.execute(sql`update api_tokens set grant_capabilities = null where id = ${id}`);
    expect((await register(token, 'legacy', ['anything', 'else'])).status).toBe(201);
    await unchanged(() => register(token, 'legacy', ['validate:judge']), 403, 'FORBIDDEN', /does not grant validate:judge/);
  });

  it('a claim stays within the grant even when the agent\'s row says more (an earlier registration by an admin)', async () => {
    await server.call('POST', '/api/agents', { body: { id: 'widened', type: 'w', capabilities: ['shell'] } });
    const dag = await server.call('POST', '/api/dags', { raw: 'name: shell-work\ntasks:\n  rm: { type: t, spec: { constraints: { capabilities: [shell] } } }\n', contentType: 'application/yaml' });
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'widened', capabilities: [] });
    const r = await server.call('POST', '/api/agents/widened/claim', { token, body: { dag_id: dag.body.results[0].dagId } });
    expect(r.status).toBe(200);
    expect(r.body.tasks).toEqual([]);
  });
});

describe('a grant\'s ceilings hold at every claim', () => {
  it('max_concurrent: an agent whose row says 50 (an admin\'s registration) holds at most its grant\'s 2, also with eight claims at once', async () => {
    await server.call('POST', '/api/agents', { body: { id: 'greedy', type: 'w', capabilities: ['bulk'], max_concurrent: 50 } });
    const tasks = Array.from({ length: 20 }, (_, i) => `  t${i}: { type: t, spec: { constraints: { capabilities: [bulk] } } }`).join('\n');
    const dagId = (await server.call('POST', '/api/dags', { raw: `name: bulk\ntasks:\n${tasks}\n`, contentType: 'application/yaml' })).body.results[0].dagId;
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'greedy', capabilities: ['bulk'], maxConcurrent: 2 });
    const claims = await Promise.all(Array.from({ length: 8 }, () => server.call('POST', '/api/agents/greedy/claim', { token, body: { dag_id: dagId, limit: 10 } })));
    expect(claims.map((c) => c.status)).toEqual(Array(8).fill(200));
    expect(claims.flatMap((c) => c.body.tasks)).toHaveLength(2);
    const [held] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from tasks where claimed_by = 'greedy' and status in ('claimed', 'running')`);
    expect(held!.n).toBe(2);
    // Finishing one frees one slot.
    const [first] = claims.flatMap((c) => c.body.tasks);
    expect((await server.call('POST', `/api/tasks/${first.id}/complete`, { token, body: { fence: first.fence, output: 1 } })).status).toBe(200);
    const again = await server.call('POST', '/api/agents/greedy/claim', { token, body: { dag_id: dagId, limit: 10 } });
    expect(again.body.tasks).toHaveLength(1);
  });

  it('a token created without --max-concurrent still has a ceiling (32 held at once), and an agent token cannot leave claims unstarted for long', async () => {
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'hoarder', capabilities: ['hoard'] });
    await unchanged(() => register(token, 'hoarder', ['hoard'], { max_concurrent: 1000 }), 403, 'FORBIDDEN',
      /allows at most 32 tasks at once \(the ceiling of a token created without --max-concurrent; an operator can grant more\), not 1000/);
    // An admin's registration says 50: claims through the token still hold at most 32.
    await server.call('POST', '/api/agents', { body: { id: 'hoarder', type: 'w', capabilities: ['hoard'], max_concurrent: 50 } });
    const tasks = Array.from({ length: 40 }, (_, i) => `  h${i}: { type: t, spec: { constraints: { capabilities: [hoard] } } }`).join('\n');
    const dagId = (await server.call('POST', '/api/dags', { raw: `name: hoard\ntasks:\n${tasks}\n`, contentType: 'application/yaml' })).body.results[0].dagId;
    await unchanged(() => server.call('POST', '/api/agents/hoarder/claim', { token, body: { dag_id: dagId, claim_ttl_sec: 3600 } }), 403, 'FORBIDDEN',
      /body\.claim_ttl_sec: an agent token may leave a claimed task unstarted for at most 300 s, not 3600/);
    const r = await server.call('POST', '/api/agents/hoarder/claim', { token, body: { dag_id: dagId, limit: 100, claim_ttl_sec: 300 } });
    expect(r.body.tasks).toHaveLength(32);
  });

  it('budget: an agent whose row has no budget spends at most its grant\'s', async () => {
    await server.call('POST', '/api/agents', { body: { id: 'unbounded', type: 'w', capabilities: ['paid'], max_concurrent: 10 } });
    const tasks = Array.from({ length: 5 }, (_, i) => `  p${i}: { type: t, spec: { constraints: { capabilities: [paid], max_cost_usd: 2 } } }`).join('\n');
    const dagId = (await server.call('POST', '/api/dags', { raw: `name: paid\ntasks:\n${tasks}\n`, contentType: 'application/yaml' })).body.results[0].dagId;
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'unbounded', capabilities: ['paid'], budgetUsd: 5 });
    const r = await server.call('POST', '/api/agents/unbounded/claim', { token, body: { dag_id: dagId, limit: 5 } });
    // Each reserves its max cost of 2 USD: two fit in 5, a third would not.
    expect(r.body.tasks).toHaveLength(2);
  });
});

describe('token roles', () => {
  const DAG = 'name: roles\ntasks:\n  a: { type: t }\n';

  it('read: reads DAGs, tasks, dead letters, stats and metrics; submits and changes nothing', async () => {
    const { token } = await tokenCreate(db, { role: 'read' });
    for (const path of ['/api/dags', '/api/tasks', '/api/dlq', '/api/agents', '/api/stats', '/metrics']) {
      expect((await server.call('GET', path, { token })).status, path).toBe(200);
    }
    await unchanged(() => server.call('POST', '/api/dags', { token, raw: DAG, contentType: 'application/yaml' }), 403, 'FORBIDDEN', /role admin or submit; token \S+ has role read/);
    const dagId = (await server.call('POST', '/api/dags', { raw: DAG, contentType: 'application/yaml' })).body.results[0].dagId;
    await unchanged(() => server.call('POST', `/api/dags/${dagId}/cancel`, { token, body: {} }), 403, 'FORBIDDEN');
  });

  it('submit: submits and reads, but cancels, reprioritizes and retries nothing', async () => {
    const { token } = await tokenCreate(db, { role: 'submit' });
    const r = await server.call('POST', '/api/dags', { token, raw: DAG, contentType: 'application/yaml' });
    expect(r.status).toBe(201);
    const dagId = r.body.results[0].dagId;
    expect((await server.call('GET', `/api/dags/${dagId}`, { token })).status).toBe(200);
    await unchanged(() => server.call('POST', `/api/dags/${dagId}/cancel`, { token, body: {} }), 403, 'FORBIDDEN');
    await unchanged(() => server.call('POST', `/api/dags/${dagId}/priority`, { token, body: { priority: 1 } }), 403, 'FORBIDDEN');
  });

  it('agent: neither reads other work nor listens to the event stream', async () => {
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'nosy', capabilities: [] });
    await unchanged(() => server.call('GET', '/api/dags', { token }), 403, 'FORBIDDEN');
    await unchanged(() => server.call('GET', '/api/events', { token }), 403, 'FORBIDDEN');
  });

  it('submit: cannot replace a schedule someone else registered; its own, yes; an admin, any', async () => {
    const yaml = (command: string, cron: string) => `name: nightly\nschedule: { cron: "${cron}" }\ntasks:\n  backup: { type: shell, spec: { input: { command: "${command}" } } }\n`;
    const post = (token: string | undefined, command: string, cron: string) =>
      server.call('POST', '/api/dags', { token, raw: yaml(command, cron), contentType: 'application/yaml' });
    expect((await post(undefined, 'backup.sh', '0 3 * * *')).status).toBe(200);
    const intern = await tokenCreate(db, { role: 'submit', name: 'intern' });
    await unchanged(() => post(intern.token, 'echo replaced', '* * * * * *'), 403, 'FORBIDDEN', /registered by admin:.*only its author or an admin/);
    const [row] = await rowsOf<{ cron: string; source: string }>(db, sql`select cron, source from schedules where name = 'nightly'`);
    expect(row).toMatchObject({ cron: '0 3 * * *', source: expect.stringContaining('backup.sh') });

    await db.execute(sql`delete from schedules`);
    expect((await post(intern.token, 'mine.sh', '0 4 * * *')).status).toBe(200);
    expect((await post(intern.token, 'mine-v2.sh', '0 5 * * *')).status).toBe(200);
    const other = await tokenCreate(db, { role: 'submit', name: 'other' });
    await unchanged(() => post(other.token, 'theirs.sh', '0 6 * * *'), 403, 'FORBIDDEN');
    expect((await post(undefined, 'admin.sh', '0 7 * * *')).status).toBe(200);
    const [after] = await rowsOf<{ cron: string; created_by: string }>(db, sql`select cron, created_by from schedules where name = 'nightly'`);
    expect(after).toMatchObject({ cron: '0 7 * * *', created_by: expect.stringMatching(/^admin:/) });
  });
});
