import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import { pino } from 'pino';
import type { Database } from '../../src/db/connection.js';
import type { DagSpec, TaskSpec } from '../../src/dag/spec.js';
import { dagSubmit } from '../../src/engine/submit.js';
import { AgentRunner } from '../../src/runtime/agent-runner.js';
import { defineAgent } from '../../src/runtime/define-agent.js';

export interface LatencyFigures { dispatchMs: number[]; dependencyMs: number[] }

/**
 * Latency through the real agent runtime (AgentRunner, NOTIFY wake-up, one
 * slot, polling set to 30 s so only a notification can wake it in time):
 * - dispatch: a one-task DAG is submitted to the idle agent, one at a time;
 *   from the submit's commit (returned to the caller) to the handler running
 *   (claimed and started), on the process clock;
 * - dependency: a chain of `n` tasks; from the upstream's completed_at to the
 *   dependent's claimed_at, both stamped by the database clock.
 */
export async function agentLatency(d: Database, n: number, task: (key: string, dependsOn?: string[]) => TaskSpec): Promise<LatencyFigures> {
  let onRun: (() => void) | undefined;
  const agent = defineAgent({ name: 'latency', capabilities: [], async run() { onRun?.(); return null; } });
  const runner = new AgentRunner(agent, { database: d, id: `latency-${Date.now()}`, pollIntervalMs: 30_000, log: pino({ level: 'silent' }) });
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
    return { dispatchMs, dependencyMs: (rows as Array<{ ms: number }>).map((r) => r.ms) };
  } finally {
    await runner.stop({ graceMs: 1000 });
  }
}
