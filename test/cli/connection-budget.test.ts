import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { CLI_COMPILED } from '../helpers/cli.js';
import { leash } from '../helpers/child-leash.js';
import { eventually } from '../helpers/wait.js';
import { tokenCreate } from '../../src/auth/tokens.js';

// This file's own pool holds one connection, so every other connection to its database is `dagent up`'s.
const database = await testDatabase({ poolSize: 1 });
const { db } = database;
const POOL = 3;

const othersConnected = async () => (await rowsOf<{ n: number }>(db, sql`
  select count(*)::int as n from pg_stat_activity
  where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()`))[0]!.n;

describe('the connection budget of a node', () => {
  it(`dagent up with DAGENT_DB_POOL=${POOL} holds at most ${POOL} + 1 connections, serving 30 long polls and 10 event streams`, async () => {
    const child = leash(spawn(process.execPath, [...CLI_COMPILED, 'up'], {
      env: { ...process.env, DATABASE_URL: database.url, DAGENT_HTTP_PORT: '0', DAGENT_DB_POOL: String(POOL), DAGENT_RETENTION: 'off' },
      stdio: ['ignore', 'pipe', 'pipe'],
    }));
    let stdout = '';
    child.stdout.on('data', (b) => (stdout += b));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const url = (await eventually('dagent up serving', async () => /on (http:\/\/\S+)\//.exec(stdout)?.[1]))!;
    const { token } = await tokenCreate(db, { role: 'admin', name: 'budget' });
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const post = (path: string, body: unknown) => fetch(`${url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
    const streams = new AbortController();
    try {
      const agents = Array.from({ length: 10 }, (_, i) => `budget-${i}`);
      for (const id of agents) expect((await post('/api/agents', { id, type: 'w', capabilities: ['shell'], max_concurrent: 3 })).status).toBe(201);
      for (let i = 0; i < 10; i++) void fetch(`${url}/api/events`, { headers, signal: streams.signal }).catch(() => {});
      const polls = agents.flatMap((id) => [1, 2, 3].map(() => post(`/api/agents/${id}/claim`, { wait_sec: 25 })
        .then(async (r) => ((await r.json()) as { tasks: unknown[] }).tasks.length)));
      await eventually('30 long polls waiting', async () => /^dagent_claims_waiting 30$/m.test(await (await fetch(`${url}/metrics`, { headers })).text()));
      const waiting = await othersConnected();
      await dagCreate(db, `name: budget\ntasks:\n${Array.from({ length: 30 }, (_, i) => `  t${i}: { type: w, spec: { constraints: { capabilities: [shell] } } }`).join('\n')}\n`);
      expect((await Promise.all(polls)).reduce((a, b) => a + b, 0)).toBe(30);
      const busy = await othersConnected();
      // The pool, and the one LISTEN connection its agents' wake-ups, the streams and the long polls share.
      expect(waiting).toBeLessThanOrEqual(POOL + 1);
      expect(busy).toBeLessThanOrEqual(POOL + 1);
      const [listeners] = await rowsOf<{ n: number }>(db, sql`
        select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name like 'dagent-listener%'`);
      expect(listeners!.n).toBe(1);
    } finally {
      streams.abort();
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });

  it('a pool size that is not a whole number of at least 2 is refused, naming the variable', async () => {
    const child = spawn(process.execPath, [...CLI_COMPILED, 'stats'], {
      env: { ...process.env, DATABASE_URL: database.url, DAGENT_DB_POOL: '1' }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (b) => (stderr += b));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(2);
    expect(stderr).toMatch(/DAGENT_DB_POOL/);
  });
});
