import { spawn } from 'node:child_process';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { adminQuery, withDatabase } from '../helpers/global-setup.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { CLI_COMPILED, cliWith } from '../helpers/cli.js';
import { leash } from '../helpers/child-leash.js';
import { eventually } from '../helpers/wait.js';
import { faultProxy } from '../faults/helpers/proxy.js';
import { frontendRead, sessionStateUses } from '../helpers/pg-frontend.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { databaseOpen } from '../../src/db/open.js';
import { withTx } from '../../src/db/tx.js';
import { rowsOfPreparedGeneric } from '../../src/db/statement.js';
import { agentRegister, taskClaim, taskComplete } from '../../src/index.js';

// PgBouncer is not on npm: two recording proxies stand in. "pooled" is where the pooler would be (DATABASE_URL),
// "direct" is DATABASE_DIRECT_URL; both forward bytes to this file's database and record what clients send, so
// the test reads every statement that went through the pooler and checks none of it needs a session.
// (`npm run scenario:pgbouncer` runs the suite through a real PgBouncer in transaction mode.)
const database = await testDatabase({ poolSize: 4 });
const { db } = database;
const pooled = await faultProxy(database.url);
const direct = await faultProxy(database.url);
const [{ name: dbName }] = (await rowsOf<{ name: string }>(db, sql`select current_database() as name`)) as [{ name: string }];
const env = { ...process.env, DATABASE_URL: pooled.url, DATABASE_DIRECT_URL: direct.url, DAGENT_RETENTION: 'off', DAGENT_LOG_LEVEL: 'warn' };

/** What the pooled connections sent that a transaction-mode pooler would break, and how many statements they sent. */
function pooledTraffic(o: { unnamedOnly: boolean }) {
  const streams = pooled.sent().map(frontendRead);
  return {
    uses: streams.flatMap((s) => sessionStateUses(s, o)),
    statements: streams.flatMap((s) => s.statements),
  };
}

describe('behind a transaction-mode pooler (DATABASE_DIRECT_URL set)', () => {
  it('refuses a pooler whose connections do not resolve dagent\'s schema, saying what to set on the server; and DATABASE_DIRECT_URL alone', async () => {
    const r = await cliWith(env)('tasks');
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/^error: DATABASE_URL: the pooler's connections have search_path .*, so dagent's tables in schema "dagent" are not found there/);
    expect(r.stderr).toContain(`ALTER ROLE "postgres" IN DATABASE "${dbName}" SET search_path TO "dagent"`);
    const alone = await cliWith({ ...env, DATABASE_URL: '' })('tasks');
    expect([alone.code, alone.stderr]).toEqual([2, expect.stringMatching(/^error: environment DATABASE_DIRECT_URL: set without DATABASE_URL/)]);
    const badMode = await cliWith({ ...env, DAGENT_DB_PREPARED: 'sometimes' })('tasks');
    expect([badMode.code, badMode.stderr]).toEqual([2, expect.stringMatching(/^error: environment DAGENT_DB_PREPARED: /)]);
  });

  it('with the search_path set on the server: a DATABASE_DIRECT_URL that does not answer, or reaches another database, is refused naming it', async () => {
    await db.execute(sql.raw(`alter role current_user in database "${dbName}" set search_path to dagent`));
    const down = await cliWith({ ...env, DATABASE_DIRECT_URL: 'postgres://postgres@127.0.0.1:1/x' })('tasks');
    expect([down.code, down.stderr]).toEqual([5, expect.stringMatching(/^error: cannot reach PostgreSQL at 127\.0\.0\.1:1 \(DATABASE_DIRECT_URL: .*ECONNREFUSED/)]);
    const elsewhere = await cliWith({ ...env, DATABASE_DIRECT_URL: withDatabase(direct.url, 'postgres') })('tasks');
    expect([elsewhere.code, elsewhere.stderr]).toEqual([2, expect.stringMatching(/^error: DATABASE_DIRECT_URL: reaches database "postgres" .* but DATABASE_URL reaches "dagent_/)]);
    const ok = await cliWith(env)('tasks', '--json');
    expect(ok.code, ok.stderr).toBe(0);
    // Checked before anything is written: a new database behind the pooler, the direct URL elsewhere, stays empty.
    const fresh = `${dbName}_fresh`;
    await adminQuery(withDatabase(database.url, 'postgres'), `create database ${fresh}`);
    try {
      const first = await cliWith({ ...env, DATABASE_URL: withDatabase(pooled.url, fresh), DATABASE_DIRECT_URL: withDatabase(direct.url, 'postgres') })('tasks');
      expect([first.code, first.stderr]).toEqual([2, expect.stringMatching(/^error: DATABASE_DIRECT_URL: reaches database "postgres" .*nothing was written/)]);
      const client = new pg.Client({ connectionString: withDatabase(database.url, fresh) });
      await client.connect();
      const { rows } = await client.query(`select count(*)::int as n from pg_namespace where nspname = 'dagent'`);
      await client.end();
      expect(rows).toEqual([{ n: 0 }]);
    } finally {
      await adminQuery(withDatabase(database.url, 'postgres'), `drop database if exists ${fresh} with (force)`);
    }
  });

  it('dagent up runs a DAG through it (an in-process agent retrying a failure, an HTTP agent woken from a long poll, a subtask it spawns); nothing the pool sent needs a session, and LISTEN went direct', async () => {
    const before = pooled.sent().length;
    const child = leash(spawn(process.execPath, [...CLI_COMPILED, 'up'], {
      env: { ...env, DAGENT_HTTP_PORT: '0', DAGENT_AGENTS: 'test/fixtures/agents/flaky.ts' }, stdio: ['ignore', 'pipe', 'pipe'],
    }));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b) => (stdout += b));
    child.stderr.on('data', (b) => (stderr += b));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const url = (await eventually('dagent up serving', async () => /on (http:\/\/\S+)\//.exec(stdout)?.[1]))!;
      const { token } = await tokenCreate(db, { role: 'admin', name: 'pooler' });
      const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      const post = async (path: string, body: unknown) => {
        const res = await fetch(`${url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
        return { status: res.status, body: (await res.json()) as any };
      };
      expect((await post('/api/agents', { id: 'web-1', type: 'w', capabilities: ['web'], max_concurrent: 2 })).status).toBe(201);
      // Waiting before the work exists: only a notification heard on the direct LISTEN connection wakes it.
      const poll = post('/api/agents/web-1/claim', { wait_sec: 25 });
      await eventually('the long poll waiting', async () => /^dagent_claims_waiting 1$/m.test(await (await fetch(`${url}/metrics`, { headers })).text()));
      const submitted = await post('/api/dags', {
        yaml: [
          // A short retry delay: the promoter (through the pooler) makes the retries READY, 1 s on, not the default 10 s.
          'name: pooled', 'defaults: { retry: { strategy: fixed, initial_delay: 1s } }', 'spawn:', '  templates:', '    side: { type: s, spec: { constraints: { capabilities: [flaky] } } }', 'tasks:',
          '  first: { type: f, spec: { constraints: { capabilities: [flaky] } } }',
          '  second: { type: w, depends_on: [first], spec: { constraints: { capabilities: [web] } } }',
        ].join('\n'),
      });
      expect(submitted.status, JSON.stringify(submitted.body)).toBe(201);
      const dagId: string = submitted.body.results[0].dagId;
      const claimed = await poll;
      expect(claimed.body.tasks.map((t: { key: string }) => t.key)).toEqual(['second']);
      const [task] = claimed.body.tasks as Array<{ id: string; fence: number }>;
      expect((await post(`/api/tasks/${task!.id}/spawn`, { fence: task!.fence, subtasks: [{ key: 'side', template: 'side' }] })).status).toBe(200);
      expect((await post(`/api/tasks/${task!.id}/complete`, { fence: task!.fence, output: { done: true } })).status).toBe(200);
      await eventually('the DAG completed', async () => (await rowsOf<{ status: string }>(db, sql`select status from dags where id = ${dagId}`))[0]?.status === 'completed', 30_000);
      const attempts = await rowsOf<{ key: string; outcomes: string[] }>(db, sql`
        select t.key, array_agg(a.outcome order by a.attempt) as outcomes from tasks t join attempts a on a.task_id = t.id
        where t.dag_id = ${dagId} group by t.key order by t.key`);
      expect(attempts).toEqual([
        { key: 'first', outcomes: ['failed', 'completed'] },
        { key: 'second', outcomes: ['completed'] },
        { key: 'second/side', outcomes: ['failed', 'completed'] },
      ]);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited, stderr).toBe(0);
    const { uses, statements } = pooledTraffic({ unnamedOnly: true });
    expect(pooled.sent().length).toBeGreaterThan(before);
    expect(statements.length).toBeGreaterThan(50);
    expect(uses).toEqual([]);
    const listened = direct.sent().map(frontendRead).filter((s) => s.statements.some((x) => /^listen /i.test(x.text)));
    expect(listened.length).toBeGreaterThanOrEqual(1);
  });

  it('DAGENT_DB_PREPARED=named (PgBouncer 1.21 and later track them): protocol-level named statements, never SQL PREPARE; a claim that locks first holds the lock for its statement', async () => {
    const d = await databaseOpen({ url: pooled.url, directUrl: direct.url, prepared: 'named', migrate: false, poolSize: 2 });
    try {
      await agentRegister(d.db, { id: 'named-1', type: 'w', capabilities: ['named'], maxConcurrent: 4 });
      await dagCreate(d.db, 'name: named\ntasks:\n  a: { type: w, spec: { constraints: { capabilities: [named] } } }\n');
      const [t] = await taskClaim(d.db, 'named-1', { start: true });
      await taskComplete(d.db, { taskId: t!.id, fence: t!.fence, output: {} });
      // (The pools before this one sent unnamed statements only: the test above says so.)
      const streams = pooled.sent().map(frontendRead);
      expect(streams.flatMap((s) => sessionStateUses(s, { unnamedOnly: false }))).toEqual([]);
      expect(streams.flatMap((s) => s.statements).filter((s) => s.name.startsWith('dagent_')).length).toBeGreaterThanOrEqual(2);

      // The lock is taken first, in the same transaction: the statement's snapshot sees what the lock's holder committed.
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      const holder = withTx(db, async (tx) => {
        await tx.execute(sql`select 1 from agents where id = 'named-1' for update`);
        await tx.execute(sql`update agents set max_concurrent = 7 where id = 'named-1'`);
        await held;
      });
      await eventually('the holder has the row', async () => (await rowsOf<{ n: number }>(db, sql`
        select count(*)::int as n from pg_locks l join pg_class c on c.oid = l.relation where c.relname = 'agents' and l.mode = 'RowShareLock'`))[0]!.n > 0);
      const read = rowsOfPreparedGeneric<{ max_concurrent: number }>(d.db, sql`select max_concurrent from agents where id = ${'named-1'}`, {
        lockFirst: sql`select 1 from agents where id = ${'named-1'} for update`,
      });
      await new Promise((r) => setTimeout(r, 200));
      release();
      await holder;
      expect(await read).toEqual([{ max_concurrent: 7 }]);
    } finally {
      await d.close();
    }
  });
});
