import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { rowsOf } from '../helpers/factories.js';
import { attemptSpanId, dagTraceId } from '../../src/observability/trace-ids.js';
import { testHttp } from '../helpers/http.js';
import { eventually } from '../helpers/wait.js';

/** The Python example agent (agents/python), run as a real process against a real server. */
const hasPython = spawnSync('python3', ['--version']).status === 0;

const database = await testDatabase();
const http = await testHttp(database);
const AGENT = 'py-1';
const token = await http.agentToken(AGENT, ['py-wordcount']);

/** Agents a failed test left running are killed. */
const children = new Set<ChildProcess>();
afterEach(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  children.clear();
});

interface Run { code: number | null; signal: NodeJS.Signals | null; output: string }

/** Start the agent (polling every 0.1 s); `stopped` resolves with its exit and output. */
function agentStart(args: string[], timeoutMs = 30_000) {
  const child = spawn('python3', ['agents/python/example_agent.py', '--poll-sec', '0.1', ...args], {
    // No id given: the agent asks who its token is (GET /api/whoami) and works as that agent, py-1.
    env: { ...process.env, DAGENT_URL: http.url, DAGENT_TOKEN: token, DAGENT_AGENT_ID: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let output = '';
  child.stdout.on('data', (b) => (output += b));
  child.stderr.on('data', (b) => (output += b));
  // Resolves when the agent exits; past the timeout it is killed and the Run says SIGKILL.
  const stopped = new Promise<Run>((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output });
    });
  });
  return { child, stopped, output: () => output };
}

/** Run the agent until it has been idle for a second; it must exit 0. */
async function agentRunUntilIdle(): Promise<string> {
  const run = await agentStart(['--exit-when-idle', '1']).stopped;
  expect(run.code, run.output).toBe(0);
  return run.output;
}

async function submit(yaml: string): Promise<string> {
  const r = await http.call('POST', '/api/dags', { raw: yaml, contentType: 'application/yaml' });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.results[0].dagId;
}

async function graph(dagId: string) {
  const r = await http.call('GET', `/api/dags/${dagId}`);
  expect(r.status).toBe(200);
  return r.body as { dag: { status: string }; nodes: Array<{ id: string; key: string; status: string; parentKey: string | null }> };
}

async function taskOf(dagId: string, key: string) {
  const node = (await graph(dagId)).nodes.find((n) => n.key === key);
  expect(node, `task ${key}`).toBeDefined();
  const r = await http.call('GET', `/api/tasks/${node!.id}`);
  expect(r.status).toBe(200);
  return r.body as {
    task: { status: string; output: any; progressMessage: string | null; heartbeatAt: string | null; leaseExpiresAt: string | null };
    inputs: Record<string, unknown>;
    attempts: Array<{ agentId: string | null; outcome: string; errorClass: string | null; errorMessage: string | null; details: any }>;
  };
}

describe.sequential('python example agent over HTTP', () => {
  it.skipIf(!hasPython)('registers, counts words, spawns subtasks and respects dependencies', async () => {
    const dagId = await submit(`
name: py-wordcount
defaults: { constraints: { capabilities: [py-wordcount] }, max_attempts: 1 }
spawn:
  templates:
    chunk: { type: wordcount, accepts: [text] }
tasks:
  intro:
    type: wordcount
    spec: { prompt: "the quick brown fox" }
  body:
    type: wordcount
    spec: { input: { chunks: ["one two three", "four five", "six"] } }
  total:
    type: wordcount-sum
    depends_on: [intro, body]
    spec: { context: [intro, body.words] }
`);
    const output = await agentRunUntilIdle();

    const g = await graph(dagId);
    expect(g.dag.status, output).toBe('completed');
    expect(g.nodes.map((n) => [n.key, n.status]).sort()).toEqual([
      ['body', 'completed'], ['body/chunk-0', 'completed'], ['body/chunk-1', 'completed'], ['body/chunk-2', 'completed'],
      ['intro', 'completed'], ['total', 'completed'],
    ]);
    expect(g.nodes.filter((n) => n.key.startsWith('body/')).every((n) => n.parentKey === 'body')).toBe(true);

    expect((await taskOf(dagId, 'intro')).task.output).toEqual({ words: 4, chars: 19 });
    // What the handler logged (ctx.log) is stored with its attempt.
    const introId = (await graph(dagId)).nodes.find((n) => n.key === 'intro')!.id;
    const logs = await http.call('GET', `/api/tasks/${introId}/logs`);
    // The claim gave it its attempt's trace context (the trace of the DAG, the span of the attempt).
    const [intro] = await rowsOf<{ fence: number }>(database.db, sql`select fence from tasks where id = ${introId}`);
    const traceparent = `00-${dagTraceId(dagId)}-${attemptSpanId(introId, intro!.fence)}-01`;
    expect(logs.body.attempt).toMatchObject({ attempt: 1, running: false, entries: [{ level: 'info', message: 'counted 4 words', fields: { chars: 19, traceparent } }] });
    expect((await taskOf(dagId, 'body/chunk-1')).task.output).toEqual({ words: 2, chars: 9 });
    expect((await taskOf(dagId, 'body')).task.output).toEqual({ words: 6, chunks: 3 });
    // The downstream task got its upstream outputs in `inputs` (the handler echoes them back).
    const total = await taskOf(dagId, 'total');
    expect(total.task.output).toEqual({
      words: 10, parts: { intro: 4, 'body.words': 6 }, inputs: { intro: { words: 4, chars: 19 }, 'body.words': 6 },
    });
    expect(total.inputs).toEqual(total.task.output.inputs);

    // Every attempt is py-1's; body's first attempt ended waiting for its subtasks.
    for (const key of ['intro', 'body/chunk-0', 'body/chunk-1', 'body/chunk-2', 'total']) {
      expect((await taskOf(dagId, key)).attempts.map((a) => [a.agentId, a.outcome]), key).toEqual([[AGENT, 'completed']]);
    }
    expect((await taskOf(dagId, 'body')).attempts.map((a) => [a.agentId, a.outcome])).toEqual([[AGENT, 'waiting'], [AGENT, 'completed']]);

    const agents = await http.call('GET', '/api/agents');
    expect(agents.body.agents).toEqual(expect.arrayContaining([
      expect.objectContaining({ id: AGENT, type: 'py-wordcount', capabilities: ['py-wordcount'], metadata: { runtime: 'python', via: 'http' } }),
    ]));
  });

  it.skipIf(!hasPython)('a retry sees why the attempt before it failed (previous_attempts over HTTP)', async () => {
    const dagId = await submit(`
name: py-learns
tasks:
  flaky:
    type: wordcount
    max_attempts: 2
    retry: { strategy: immediate }
    spec: { input: { raise_once: "the first try always trips" }, constraints: { capabilities: [py-wordcount] } }
`);
    const output = await agentRunUntilIdle();
    const t = await taskOf(dagId, 'flaky');
    expect(t.task.status, output).toBe('completed');
    expect(t.task.output).toEqual({ recovered_from: ['the first try always trips'], attempt: 2 });
    expect(t.attempts.map((a) => a.outcome)).toEqual(['failed', 'completed']);
  });

  it.skipIf(!hasPython)('fails a task whose handler raises as an error with its message, dead-lettered', async () => {
    const dagId = await submit(`
name: py-crash
tasks:
  boom:
    type: wordcount
    max_attempts: 1
    spec: { input: { raise: "cannot count: input is haunted" }, constraints: { capabilities: [py-wordcount] } }
  after:
    type: wordcount
    depends_on: [boom]
    spec: { prompt: never runs, constraints: { capabilities: [py-wordcount] } }
`);
    const output = await agentRunUntilIdle();

    const boom = await taskOf(dagId, 'boom');
    expect(boom.task.status, output).toBe('dead_lettered');
    expect(boom.attempts).toHaveLength(1);
    expect(boom.attempts[0]).toMatchObject({ agentId: AGENT, outcome: 'failed', errorClass: 'error', errorMessage: 'cannot count: input is haunted' });
    expect(boom.attempts[0]!.details).toMatchObject({ exception: 'ValueError' });
    expect(boom.attempts[0]!.details.traceback).toContain('raise ValueError(data["raise"])');
    expect((await taskOf(dagId, 'after')).task.status).toBe('pending');

    const dlq = await http.call('GET', `/api/dlq?dag_id=${dagId}`);
    expect(dlq.body.entries).toEqual([expect.objectContaining({ taskKey: 'boom', errorClass: 'error' })]);
    expect((await graph(dagId)).dag.status).toBe('blocked');
  });

  it.skipIf(!hasPython)('on SIGTERM releases the task in hand (no attempt used) and exits 0', async () => {
    const dagId = await submit(`
name: py-slow
tasks:
  slow:
    type: wordcount
    spec: { prompt: slow words, input: { sleep_sec: 60 }, constraints: { capabilities: [py-wordcount], heartbeat_sec: 1 } }
`);
    const agent = agentStart(['--grace-sec', '0']);
    // The handler reports progress once, then sleeps: the agent's background heartbeats keep extending the lease.
    const first = await eventually('slow running', async () => {
      const { task } = await taskOf(dagId, 'slow');
      return task.status === 'running' && task.progressMessage === 'sleeping 60 s' && task;
    });
    await eventually('a background heartbeat', async () => {
      const { task } = await taskOf(dagId, 'slow');
      return Date.parse(task.heartbeatAt!) > Date.parse(first.heartbeatAt!) && Date.parse(task.leaseExpiresAt!) > Date.parse(first.leaseExpiresAt!);
    });
    agent.child.kill('SIGTERM');
    const run = await agent.stopped;
    expect(run.code, run.output).toBe(0);

    const slow = await taskOf(dagId, 'slow');
    expect(slow.task.status).toBe('ready');
    expect(slow.attempts.map((a) => [a.agentId, a.outcome])).toEqual([[AGENT, 'released']]);
    await http.call('POST', `/api/dags/${dagId}/cancel`, { body: {} });
  });
});
