/**
 * What the server's backends and the machine do while a run goes on (--breakdown): where the loop waits. A
 * connection of its own samples `pg_stat_activity`, pausing SAMPLE_MS between samples (so one every 12-15 ms with
 * the query's own time); each active client backend's statement is sorted by kind (the caller's `kindOf`) and its
 * state by what it waits for ("CPU": no wait event, so running or waiting for a core). /proc/stat gives the
 * machine's busy, I/O-wait and idle shares over the run, and the event loop's utilization the share of the run this
 * process's one JavaScript thread was busy. The sampler runs in this process and its backend in the server, so their
 * CPU (70-80 trivial statements a second) is counted in the run's figures.
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import pg from 'pg';

const SAMPLE_MS = 10;

/** What an active backend is doing: on CPU (no wait event), or the wait's class. */
function stateOf(type: string | null, event: string | null): string {
  if (!type) return 'CPU';
  if (/^W(AL|al)/.test(event ?? '')) return 'WAL';
  if (type === 'Lock') return 'row or relation lock';
  if (type === 'LWLock') return 'buffer or other LWLock';
  if (type === 'IO') return 'other I/O';
  return 'other';
}

/** The machine's CPU time so far, in ticks: [busy, iowait, idle]. */
function machineTicks(): [number, number, number] {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, idle, iowait, irq, softirq, steal] = f as [number, number, number, number, number, number, number, number];
  return [user + nice + system + irq + softirq + steal, iowait, idle];
}

const pctOf = (n: number, of: number) => `${Math.round((100 * n) / of)} %`;

/** Runs `run` with the sampler beside it; returns its result and the lines describing the waits. */
export async function activityDuring<T>(url: string, kindOf: (query: string) => string, run: () => Promise<T>): Promise<{ result: T; lines: string[] }> {
  const sampler = new pg.Client({ connectionString: url });
  await sampler.connect();
  const byKind = new Map<string, Map<string, number>>();
  const atOnce: number[] = [];
  let samples = 0;
  let sampling = true;
  const loop = (async () => {
    while (sampling) {
      const { rows } = await sampler.query<{ query: string; type: string | null; event: string | null }>(
        `select query, wait_event_type as type, wait_event as event from pg_stat_activity
         where state = 'active' and backend_type = 'client backend' and pid <> pg_backend_pid()`);
      samples++;
      atOnce[rows.length] = (atOnce[rows.length] ?? 0) + 1;
      for (const r of rows) {
        const kind = kindOf(r.query);
        const states = byKind.get(kind) ?? new Map<string, number>();
        const s = stateOf(r.type, r.event);
        states.set(s, (states.get(s) ?? 0) + 1);
        byKind.set(kind, states);
      }
      await new Promise((resolve) => setTimeout(resolve, SAMPLE_MS));
    }
  })();
  const m0 = machineTicks();
  const started = performance.now();
  const elu0 = performance.eventLoopUtilization();
  let result: T;
  try {
    result = await run();
  } finally {
    sampling = false;
    await loop.catch(() => {});
    await sampler.end().catch(() => {});
  }
  const m1 = machineTicks();
  const elu = performance.eventLoopUtilization(elu0).utilization;
  const everyMs = (performance.now() - started) / Math.max(1, samples);
  const [busy, iowait, idle] = m1.map((v, i) => v - m0[i]!) as [number, number, number];
  const all = busy + iowait + idle;
  const kinds = [...byKind].map(([k, states]) => [k, states, [...states.values()].reduce((a, b) => a + b, 0)] as const).sort((a, b) => b[2] - a[2]);
  return {
    result,
    lines: [
      `  where it waits (pg_stat_activity, ${samples} samples, one every ${everyMs.toFixed(1)} ms; per statement kind, its active backends summed over the samples as a share of them, by what they wait for; CPU = no wait event):`,
      ...kinds.slice(0, 3).map(([k, states, n]) => `    ${k}: active ${pctOf(n, samples)}: ${[...states].sort((a, b) => b[1] - a[1]).map(([s, c]) => `${s} ${pctOf(c, samples)}`).join(', ')}`),
      `    client backends active at once: ${Array.from(atOnce, (c, n) => `${n}: ${pctOf(c ?? 0, samples)}`).join(', ')}`,
      `    the machine (both cores): busy ${pctOf(busy, all)}, waiting for I/O ${pctOf(iowait, all)}, idle ${pctOf(idle, all)}; this process's event loop busy ${pctOf(elu, 1)} of the run`,
    ],
  };
}
