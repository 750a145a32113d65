import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../src/db/open.js';
import { openOptionsLike, testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { faultProxy } from './helpers/proxy.js';

// A finished result was thrown away on a database blip: the API answered 500, the agent did not
// retry, the lease lapsed and the work ran again. Now: 503 with Retry-After, the Python agent
// retries its report with backoff, and a report made again is applied once.
const hasPython = spawnSync('python3', ['--version']).status === 0;
const database = await testDatabase();
const { db } = database;
// The HTTP server reaches PostgreSQL through the proxy; the test reads the database directly.
const proxy = await faultProxy(database.url);
const through = await databaseOpen({ ...openOptionsLike(database, proxy.url), migrate: false, poolSize: 4 });
afterAll(() => through.close());
const http = await testHttp({ ...database, db: through.db, url: proxy.url });

const children = new Set<ChildProcess>();
afterEach(() => {
  proxy.set('pass');
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  children.clear();
});

async function submit(yaml: string): Promise<string> {
  const r = await http.call('POST', '/api/dags', { raw: yaml, contentType: 'application/yaml' });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.results[0].dagId;
}

const attemptsOf = (dagId: string, key: string) => rowsOf<{ outcome: string; fence: number }>(db, sql`
  select a.outcome, a.fence from attempts a join tasks t on t.id = a.task_id where t.dag_id = ${dagId} and t.key = ${key} order by a.fence`);

describe('the database goes away while agents report', () => {
  it('the API answers 503 with Retry-After and the UNAVAILABLE code, never 500, and recovers when it is back', async () => {
    proxy.set('drop');
    const r = await http.call('GET', '/api/dags');
    expect(r.status, JSON.stringify(r.body)).toBe(503);
    expect(r.headers.get('retry-after')).toBe('2');
    expect(r.body.error).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringMatching(/database is unavailable; retry in 2s/) });
    proxy.set('pass');
    await eventually('the API answers again', async () => (await http.call('GET', '/api/dags')).status === 200);
  });

  it.skipIf(!hasPython)('a Python agent whose completion meets a dead database retries it until it lands: completed once, one attempt', async () => {
    const dagId = await submit('name: blip\ntasks:\n  slow: { type: wordcount, max_attempts: 1, spec: { prompt: one two three, constraints: { capabilities: [py-wordcount] }, input: { sleep_sec: 3 } } }\n');
    const token = await http.agentToken('py-blip', ['py-wordcount']);
    const child = spawn('python3', ['agents/python/example_agent.py', '--poll-sec', '0.1', '--max-tasks', '1'], {
      env: { ...process.env, DAGENT_URL: http.url, DAGENT_TOKEN: token, DAGENT_AGENT_ID: 'py-blip' }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let output = '';
    child.stdout.on('data', (b) => (output += b));
    child.stderr.on('data', (b) => (output += b));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    // While the handler works, the database becomes unreachable for the server, until the agent has been refused.
    // The handler reports progress as it starts; once that landed, it only sleeps until it completes.
    await eventually('the agent is running the task', async () => (await rowsOf<{ m: string | null }>(db, sql`
      select progress_message as m from tasks where dag_id = ${dagId}`))[0]?.m === 'sleeping 3 s', 15_000);
    proxy.set('drop');
    await eventually('the completion was refused with a 503 and is being retried', async () => /complete slow: server unavailable; retrying/.test(output), 15_000).catch((e: Error) => { throw new Error(`${e.message}\n${output}`); });
    proxy.set('pass');
    expect(await exited, output).toBe(0);
    expect(output).toMatch(/complete slow -> \{"completed": true/);
    const [task] = await rowsOf<{ status: string; output: { words: number } }>(db, sql`select status, output from tasks where dag_id = ${dagId}`);
    expect(task).toMatchObject({ status: 'completed', output: { words: 3 } });
    expect(await attemptsOf(dagId, 'slow')).toEqual([{ outcome: 'completed', fence: 1 }]);
  });
});

describe('reports are idempotent', () => {
  const ONE = (name: string) => `name: ${name}\ntasks:\n  a: { type: t, max_attempts: 3, spec: { constraints: { capabilities: [idem] } } }\n`;
  async function held(name: string, agent: string) {
    const dagId = await submit(ONE(name));
    const token = await http.agentToken(agent, ['idem']);
    expect((await http.call('POST', '/api/agents', { token, body: { id: agent, type: 't', capabilities: ['idem'] } })).status).toBe(201);
    const c = await http.call('POST', `/api/agents/${agent}/claim`, { token, body: { start: true, dag_id: dagId } });
    const [t] = c.body.tasks;
    return { dagId, token, t, report: (action: string, body: Record<string, unknown>) => http.call('POST', `/api/tasks/${t.id}/${action}`, { token, body: { fence: t.fence, ...body } }) };
  }

  it('the same completion twice is applied once (the second says replayed); a different output for that attempt is a 409', async () => {
    const { dagId, report } = await held('idem-complete', 'idem-1');
    const first = await report('complete', { output: { n: 1, s: 'x' }, cost_usd: 0.5 });
    expect(first.body).toMatchObject({ completed: true, replayed: false });
    // Key order does not matter: the output is compared as JSON.
    const again = await report('complete', { output: { s: 'x', n: 1 }, cost_usd: 0.5 });
    expect([again.status, again.body]).toEqual([200, expect.objectContaining({ completed: true, replayed: true })]);
    const other = await report('complete', { output: { n: 2 } });
    expect([other.status, other.body.error.code, other.body.error.message]).toEqual([409, 'CONFLICT', expect.stringMatching(/already reported a different output/)]);
    const failed = await report('fail', { error_class: 'oops', message: 'late' });
    expect([failed.status, failed.body.error.message]).toEqual([409, expect.stringMatching(/already completed; an attempt has one result/)]);
    expect(await attemptsOf(dagId, 'a')).toEqual([{ outcome: 'completed', fence: 1 }]);
    const [spent] = await rowsOf<{ usd: number }>(db, sql`select spent_usd::float8 as usd from dags where id = ${dagId}`);
    expect(spent!.usd).toBe(0.5);
  });

  it('the same failure twice gets the same outcome and counts one attempt; a completion after it is a 409', async () => {
    const { dagId, report } = await held('idem-fail', 'idem-2');
    const first = await report('fail', { error_class: 'flaky', message: 'try again' });
    expect(first.status).toBe(200);
    const again = await report('fail', { error_class: 'flaky', message: 'try again' });
    expect([again.status, again.body.status]).toEqual([200, first.body.status]);
    const other = await report('fail', { error_class: 'other', message: 'no' });
    expect([other.status, other.body.error.message]).toEqual([409, expect.stringMatching(/already failed with flaky: try again/)]);
    const complete = await report('complete', { output: 1 });
    expect([complete.status, complete.body.error.message]).toEqual([409, expect.stringMatching(/already failed \(flaky\); it cannot also complete/)]);
    expect(await attemptsOf(dagId, 'a')).toEqual([{ outcome: 'failed', fence: 1 }]);
  });
});
