/**
 * The bench's workload: no-op tasks in flat DAGs and chains, and one agent that claims and completes them through
 * the runtime's claim buffer and completion batcher. Shared by the figures (run.ts) and the breakdown (breakdown.ts).
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import type { Database } from '../../src/db/handle.js';
import { TASK_DEFAULTS, type TaskSpec } from '../../src/dag/spec.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { ClaimBuffer } from './claim-buffer.js';
import { CompletionBatcher } from '../../src/runtime/completion-batcher.js';

/** Claim and completion batch size (BENCH_BATCH, default 200). */
export const BATCH = Number(process.env.BENCH_BATCH ?? 200);

export function task(key: string, dependsOn: string[] = [], extra: Partial<TaskSpec> = {}): TaskSpec {
  return {
    key, type: 'noop', body: { context: [], models: [], fallbackModels: [], input: {} }, requiredCapabilities: [],
    priority: 50, boostPerMinute: 0, dependsOn, maxAttempts: 3, retry: { ...TASK_DEFAULTS.retry }, tags: [], ...extra,
  };
}

export async function submitFlat(d: Database, total: number, perDag = 1000, extra: Partial<TaskSpec> = {}) {
  for (let i = 0; i < total / perDag; i++) {
    await dagSubmit(d.db, [{ name: `flat-${i}`, params: {}, tasks: Array.from({ length: perDag }, (_, j) => task(`t${j}`, [], extra)) }]);
  }
}
export async function submitChains(d: Database, chains: number, length: number) {
  for (let c = 0; c < chains; c++) {
    await dagSubmit(d.db, [{ name: `chain-${c}`, params: {}, tasks: Array.from({ length }, (_, i) => task(`t${i}`, i ? [`t${i - 1}`] : [])) }]);
  }
}

export interface RunResult { seconds: number; tasks: number; hopsMs: number[]; hopsFromHandlerMs: number[] }

/**
 * One agent with `slots` concurrent no-op handlers, fed by a claim buffer and
 * writing through a completion batcher: the shape of the agent runtime.
 */
export async function runAgent(d: Database, slots: number, expected: number, batch = BATCH, handOff = true, hopsFromHandler = false): Promise<RunResult> {
  const agentId = `bench-${slots}-${Date.now()}`;
  // The agent may hold what its buffer holds: claimed ahead plus running.
  await agentRegister(d.db, { id: agentId, type: 'bench', capabilities: [], maxConcurrent: batch * 2 });
  const buffer = new ClaimBuffer({ db: d.db, agentId, batch, maxHeld: batch * 2, capabilities: [] });
  const batcher = new CompletionBatcher({
    db: d.db, maxBatch: batch, maxInFlight: 3, onUnblocked: () => buffer.wake(),
    // As the agent runtime does: the dependents a completion unblocks come back claimed when this agent would take them first.
    handTo: (completing) => handOff ? { agentId, capabilities: [], max: Math.min(completing, buffer.room(completing)), start: false, claimTtlSec: 60 } : null,
    onHanded: (tasks) => buffer.accept(tasks),
  });
  // Two hops: from the upstream's completion written (its reply) to its dependent taken, which is how graphile-worker's
  // is measured (from its handler's end, after the handler's addJob committed the next job: peers.ts); and from the
  // upstream's handler returning, with dagent's dependency write, the completion, inside it.
  const completedAt = new Map<string, number>();
  const endedAt = new Map<string, number>();
  const hopsMs: number[] = [];
  const hopsFromHandlerMs: number[] = [];
  let done = 0;
  const started = performance.now();
  const slot = async () => {
    while (done < expected) {
      const t = await buffer.take();
      if (!t) {
        await buffer.waitForWork(20);
        continue;
      }
      const claimedAt = performance.now();
      const n = Number(t.key.slice(1));
      const [upstreamDone, upstreamEnded] = n > 0 ? [completedAt.get(`${t.dagId}:${n - 1}`), endedAt.get(`${t.dagId}:${n - 1}`)] : [];
      if (upstreamDone !== undefined) hopsMs.push(Math.max(0, claimedAt - upstreamDone));
      if (upstreamEnded !== undefined) hopsFromHandlerMs.push(Math.max(0, claimedAt - upstreamEnded));
      // The handler is a no-op; the slot is free as soon as it returns, the write is batched.
      // Only where asked: a map entry per task is the bench's cost, not dagent's (~0.3 µs per task).
      if (hopsFromHandler) endedAt.set(`${t.dagId}:${n}`, performance.now());
      void batcher.complete({ taskId: t.id, fence: t.fence, output: null }).then((o) => {
        buffer.settled();
        if (!o.completed) throw new Error(`completion of ${t.id} refused`);
        completedAt.set(`${t.dagId}:${n}`, performance.now());
        if (++done >= expected) buffer.wake();
      });
    }
  };
  await Promise.all(Array.from({ length: slots }, slot));
  await batcher.drain();
  const seconds = (performance.now() - started) / 1000;
  return { seconds, tasks: done, hopsMs, hopsFromHandlerMs };
}

export async function reset(d: Database) {
  // Cascade: every table that references a task (step replays, the usage ledger, streams) goes with it.
  await d.db.execute(sql`truncate dags, tasks, edges, attempts, agents, dead_letters, events, capability_groups, concurrency_keys, concurrency_releases, attempt_logs, attempt_log_stats, task_steps cascade`);
}

/**
 * Refresh planner statistics after loading, as autovacuum does for a queue in
 * steady state (tasks is analyzed after ~1% of it changes, migration 0002); a
 * 3-second bench ends before autovacuum's first nap does.
 */
export async function analyze(d: Database) {
  await d.db.execute(sql`vacuum analyze tasks`);
}

export const pct = (xs: number[], p: number) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
export const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
