import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import { pino } from 'pino';
import type { Database } from '../../src/db/handle.js';
import type { DagSpec, TaskSpec } from '../../src/dag/spec.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { AgentRunner } from '../../src/runtime/agent-runner.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import { httpServerCreate } from '../../src/http/server.js';
import { tokenCreate } from '../../src/auth/tokens.js';

export interface LatencyFigures { dispatchMs: number[]; dependencyMs: number[]; handlerHopMs: number[] }

/**
 * Latency through the real agent runtime (AgentRunner, NOTIFY wake-up, one
 * slot, polling set to 30 s so only a notification can wake it in time):
 * - dispatch: a one-task DAG is submitted to the idle agent, one at a time;
 *   from the submit's commit (returned to the caller) to the handler running
 *   (claimed and started), on the process clock;
 * - dependency: a chain of `n` tasks; from the upstream's completed_at to the
 *   dependent's claimed_at, both stamped by the database clock (with the hand-off, the
 *   dependent is claimed inside the statement that completed its upstream);
 * - handler to handler: the same chain on the process clock, from the upstream's handler
 *   returning to the dependent's handler running (the completion's round trip included).
 */
export async function agentLatency(d: Database, n: number, task: (key: string, dependsOn?: string[]) => TaskSpec, handOff = true): Promise<LatencyFigures> {
  let onRun: (() => void) | undefined;
  // Per chain task: when its handler began and when it returned.
  const ran = new Map<string, { start: number; end: number }>();
  const agent = defineAgent({
    name: 'latency', capabilities: [],
    async run(t) {
      const start = performance.now();
      onRun?.();
      if (t.key !== 'only') ran.set(t.key, { start, end: performance.now() });
      return null;
    },
  });
  const runner = new AgentRunner(agent, { database: d, id: `latency-${Date.now()}`, pollIntervalMs: 30_000, handOff, log: pino({ level: 'silent' }) });
  await runner.start();
  try {
    const dispatchMs: number[] = [];
    for (let i = 0; i < n; i++) {
      const ran = new Promise<number>((resolve) => { onRun = () => resolve(performance.now()); });
      const spec: DagSpec = { name: `dispatch-${i}`, params: {}, tasks: [task('only')] };
      await dagSubmit(d.db, [spec]);
      const committed = performance.now();
      dispatchMs.push((await ran) - committed);
    }
    onRun = undefined;
    const chain: DagSpec = { name: 'dependency-chain', params: {}, tasks: Array.from({ length: n }, (_, i) => task(`t${i}`, i ? [`t${i - 1}`] : [])) };
    const dagId = (await dagSubmit(d.db, [chain]))[0]!.dagId;
    for (;;) {
      const { rows } = await d.db.execute(sql`select status from dags where id = ${dagId}`);
      if ((rows[0] as { status: string }).status === 'completed') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const { rows } = await d.db.execute(sql`
      select extract(epoch from down.claimed_at - up.completed_at)::float8 * 1000 as ms
      from edges e join tasks up on up.id = e.upstream_id join tasks down on down.id = e.downstream_id
      where e.dag_id = ${dagId}`);
    const handlerHopMs = Array.from({ length: n - 1 }, (_, i) => ran.get(`t${i + 1}`)!.start - ran.get(`t${i}`)!.end);
    return { dispatchMs, dependencyMs: (rows as Array<{ ms: number }>).map((r) => r.ms), handlerHopMs };
  } finally {
    await runner.stop({ graceMs: 1000 });
  }
}

/**
 * Dispatch to an idle HTTP agent that long-polls (`wait_sec`): the agent's claim is waiting on the
 * server when a one-task DAG is submitted; from the submit's commit to the claim's answer reaching
 * the client, on the process clock. The same measure as the runtime's dispatch, over HTTP.
 */
export async function httpLongPollDispatch(d: Database, n: number, task: (key: string) => TaskSpec): Promise<number[]> {
  const server = await httpServerCreate({ db: d.db, databaseUrl: d.url, log: pino({ level: 'silent' }) });
  const url = await server.listen(0, '127.0.0.1');
  try {
    const { token } = await tokenCreate(d.db, { role: 'admin', name: 'bench' });
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const post = (path: string, body: unknown) => fetch(`${url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) }).then((r) => r.json() as Promise<any>);
    const id = `http-latency-${Date.now()}`;
    await post('/api/agents', { id, type: 'bench', capabilities: [], max_concurrent: 1 });
    const waiting = async () => {
      for (;;) {
        const text = await (await fetch(`${url}/metrics`, { headers })).text();
        if (/^dagent_claims_waiting 1$/m.test(text)) return;
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    const ms: number[] = [];
    for (let i = 0; i < n; i++) {
      const answered = post(`/api/agents/${id}/claim`, { wait_sec: 30, start: true }).then((r: { tasks: Array<{ id: string; fence: number }> }) => ({ at: performance.now(), task: r.tasks[0]! }));
      await waiting();
      await dagSubmit(d.db, [{ name: `http-dispatch-${i}`, params: {}, tasks: [task('only')] }]);
      const committed = performance.now();
      const { at, task: claimed } = await answered;
      ms.push(at - committed);
      await post(`/api/tasks/${claimed.id}/complete`, { fence: claimed.fence, output: null });
    }
    return ms;
  } finally {
    await server.close();
  }
}
