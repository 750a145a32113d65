import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import { pino } from 'pino';
import type { Database } from '../../src/db/handle.js';
import { TASK_DEFAULTS, type DagSpec, type TaskSpec } from '../../src/dag/spec.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { priorityConfigure, PRIORITY_DEFAULTS } from '../../src/model/priority.js';
import { AgentFleet } from '../../src/runtime/fleet.js';
import { defineAgent } from '../../src/runtime/define-agent.js';

/**
 * Scheduling quality: seeded DAG instances, each run alone by 8 single-slot agents
 * (the real runtime: an AgentFleet, NOTIFY wake-up) whose handler sleeps the task's
 * duration. Makespan (DAG created → completed, database clock) is divided by the
 * lower bound max(critical path, total work / 8). Two policies:
 * - dagent: effective priority with the critical-path term (estimates declared,
 *   equal to the true durations; the rank scale compressed like the durations);
 * - FIFO: priority and age only (critical-path term off), so ties go by ready_at.
 */
export interface MakespanFigures {
  family: string; policy: string; instances: number; meanRatio: number; maxRatio: number; seconds: number;
  /** Per dependent task: its start after its last upstream completed and its agent was free, ms, database clock. */
  hopMs: number[];
  /**
   * The bench's own share of the overhead: how much longer the handlers' sleeps took than the tasks' durations (a
   * timer fires late), as a fraction of the durations' sum.
   */
  sleepOverrun: number;
}

const AGENTS = 8;
/** Task durations, ms: short, medium, long (60 %, 30 %, 10 %). */
const DURATIONS = [20, 80, 240] as const;
/** Real-life minutes compressed to bench milliseconds: the rank scale (1 h) shrinks by the same factor (20 ms stands for 1 min). */
const CP_SCALE_SEC = 3600 * (DURATIONS[0] / 1000) / 60;

function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function task(key: string, ms: number, dependsOn: string[]): TaskSpec {
  return {
    key, type: 'sleep', body: { context: [], models: [], fallbackModels: [], input: { ms } }, requiredCapabilities: [],
    priority: 50, boostPerMinute: 0, estimateSec: ms / 1000, dependsOn, maxAttempts: 3, retry: { ...TASK_DEFAULTS.retry }, tags: [],
  };
}

/** (a) random layered DAG: 20–200 tasks in 4–10 layers, each task after 1–3 tasks of earlier layers (mostly the previous one). */
export function layeredInstance(seed: number): TaskSpec[] {
  const r = rng(seed);
  const n = 20 + Math.floor(r() * 181);
  const layers = 4 + Math.floor(r() * 7);
  const byLayer: string[][] = Array.from({ length: layers }, () => []);
  const tasks: TaskSpec[] = [];
  for (let i = 0; i < n; i++) {
    const layer = i < layers ? i : Math.floor(r() * layers);
    const key = `t${i}`;
    const earlier = byLayer.slice(0, layer).flat();
    const parents = new Set<string>();
    const want = layer === 0 ? 0 : 1 + Math.floor(r() * 3);
    for (let p = 0; p < want && earlier.length; p++) {
      const prev = byLayer[layer - 1]!;
      const pool = r() < 0.7 && prev.length ? prev : earlier;
      parents.add(pool[Math.floor(r() * pool.length)]!);
    }
    const x = r();
    const ms = x < 0.6 ? DURATIONS[0] : x < 0.9 ? DURATIONS[1] : DURATIONS[2];
    byLayer[layer]!.push(key);
    tasks.push(task(key, ms, [...parents]));
  }
  return tasks;
}

/** (b) many short independent tasks created first, then one long chain created after them. */
export function shortsThenChainInstance(seed: number): TaskSpec[] {
  const r = rng(seed);
  const shorts = 40 + Math.floor(r() * 41);
  const chain = 6 + Math.floor(r() * 5);
  return [
    ...Array.from({ length: shorts }, (_, i) => task(`s${i}`, DURATIONS[0], [])),
    ...Array.from({ length: chain }, (_, i) => task(`c${i}`, DURATIONS[1], i ? [`c${i - 1}`] : [])),
  ];
}

export function lowerBoundMs(tasks: TaskSpec[]): number {
  const ms = new Map(tasks.map((t) => [t.key, (t.body.input as { ms: number }).ms]));
  const finish = new Map<string, number>();
  for (const t of tasks) finish.set(t.key, ms.get(t.key)! + Math.max(0, ...t.dependsOn.map((d) => finish.get(d)!)));
  const total = [...ms.values()].reduce((a, b) => a + b, 0);
  return Math.max(Math.max(...finish.values()), total / AGENTS);
}

/**
 * The same instances under an ideal list scheduler: 8 agents, no overhead at all (a task starts the instant its last
 * upstream and an agent are free), the next task by the policy's order: dagent's, the highest upward rank (the
 * critical-path term decides, as priorities and ages are equal), then the earliest ready, then creation order;
 * FIFO's, the earliest ready, then creation order. Its ratio to the lower bound is what the order alone costs,
 * the floor under the measured ratio; the rest is per-task overhead.
 */
export function idealMeanRatio(family: 'layered' | 'shorts-then-chain', policy: 'dagent' | 'fifo', instances: number): number {
  let sum = 0;
  for (let i = 0; i < instances; i++) {
    const tasks = family === 'layered' ? layeredInstance(1000 + i) : shortsThenChainInstance(2000 + i);
    sum += listScheduleMs(tasks, policy) / lowerBoundMs(tasks);
  }
  return sum / instances;
}

function listScheduleMs(tasks: TaskSpec[], policy: 'dagent' | 'fifo'): number {
  const ms = new Map(tasks.map((t) => [t.key, (t.body.input as { ms: number }).ms]));
  const order = new Map(tasks.map((t, i) => [t.key, i]));
  const children = new Map<string, string[]>(tasks.map((t) => [t.key, []]));
  for (const t of tasks) for (const d of t.dependsOn) children.get(d)!.push(t.key);
  const rank = new Map<string, number>();
  for (const t of [...tasks].reverse()) rank.set(t.key, ms.get(t.key)! + Math.max(0, ...children.get(t.key)!.map((c) => rank.get(c)!)));
  const waiting = new Map(tasks.map((t) => [t.key, t.dependsOn.length]));
  const ready: Array<{ key: string; at: number }> = tasks.filter((t) => t.dependsOn.length === 0).map((t) => ({ key: t.key, at: 0 }));
  const running: Array<{ key: string; end: number }> = [];
  const before = (a: { key: string; at: number }, b: { key: string; at: number }) =>
    (policy === 'dagent' ? rank.get(b.key)! - rank.get(a.key)! : 0) || a.at - b.at || order.get(a.key)! - order.get(b.key)!;
  let now = 0;
  let end = 0;
  while (ready.length || running.length) {
    ready.sort(before);
    while (running.length < AGENTS && ready.length) {
      const next = ready.shift()!;
      running.push({ key: next.key, end: now + ms.get(next.key)! });
    }
    now = Math.min(...running.map((r) => r.end));
    for (const done of running.filter((r) => r.end === now)) {
      running.splice(running.indexOf(done), 1);
      end = Math.max(end, now);
      for (const c of children.get(done.key)!) {
        waiting.set(c, waiting.get(c)! - 1);
        if (waiting.get(c) === 0) ready.push({ key: c, at: now });
      }
    }
  }
  return end;
}

export async function makespanBench(
  d: Database, family: 'layered' | 'shorts-then-chain', policy: 'dagent' | 'fifo', instances: number, handOff = true,
): Promise<MakespanFigures> {
  const before = priorityConfigure(policy === 'dagent' ? { cpScaleSec: CP_SCALE_SEC } : { cpMax: 0 });
  let [slept, asked] = [0, 0];
  const sleeper = defineAgent({
    name: 'sleeper', capabilities: [], run: (t) => {
      const ms = (t.spec.input as { ms: number }).ms;
      const t0 = performance.now();
      return new Promise((r) => setTimeout(() => {
        [slept, asked] = [slept + performance.now() - t0, asked + ms];
        r(null);
      }, ms));
    },
  });
  // One process, one LISTEN connection for the 8 agents: how `dagent up` runs a fleet.
  const fleet = new AgentFleet(d, Array.from({ length: AGENTS }, (_, i) => ({ def: sleeper, id: `mk-${policy}-${i}`, concurrency: 1 })),
    { pollIntervalMs: 1000, log: pino({ level: 'silent' }), handOff });
  await fleet.start();
  const started = Date.now();
  const ratios: number[] = [];
  const hopMs: number[] = [];
  try {
    for (let i = 0; i < instances; i++) {
      const tasks = family === 'layered' ? layeredInstance(1000 + i) : shortsThenChainInstance(2000 + i);
      const spec: DagSpec = { name: `${family}-${i}`, params: {}, tasks };
      const dagId = (await dagSubmit(d.db, [spec]))[0]!.dagId;
      // From the submit's commit (the work is claimable from then on), on the machine's clock, which the database shares.
      const committedAt = Date.now();
      for (;;) {
        const { rows } = await d.db.execute(sql`
          select status, extract(epoch from completed_at)::float8 * 1000 as at from dags where id = ${dagId}`);
        const row = rows[0] as { status: string; at: number | null };
        if (row.status === 'completed') {
          ratios.push((row.at! - committedAt) / lowerBoundMs(tasks));
          // The scheduler's share of each hop: from when both its last upstream had completed and the agent that
          // ran it was free (its previous attempt ended) to its start. Waits for a free agent are not counted.
          const hops = await d.db.execute(sql`
            select extract(epoch from da.started_at - greatest(max(up.completed_at), coalesce((
                select max(pa.ended_at) from attempts pa where pa.agent_id = da.agent_id and pa.ended_at <= da.started_at), '-infinity')
              ))::float8 * 1000 as ms
            from attempts da join edges e on e.downstream_id = da.task_id join tasks up on up.id = e.upstream_id
            where da.dag_id = ${dagId} and da.attempt = 1
            group by da.task_id, da.fence, da.started_at, da.agent_id`);
          hopMs.push(...(hops.rows as Array<{ ms: number }>).map((h) => h.ms));
          break;
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    }
  } finally {
    await fleet.stop(1000);
    priorityConfigure({ ...PRIORITY_DEFAULTS, ...{ cpScaleSec: before.cpScaleSec, cpMax: before.cpMax } });
  }
  return {
    family, policy, instances, meanRatio: ratios.reduce((a, b) => a + b, 0) / ratios.length, maxRatio: Math.max(...ratios),
    seconds: (Date.now() - started) / 1000, hopMs, sleepOverrun: (slept - asked) / asked,
  };
}
