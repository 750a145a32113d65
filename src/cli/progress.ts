import type { Db } from '../db/handle.js';
import { dagStatus } from '../engine/read/inspect.js';
import { usd } from './output.js';
import type { Io } from './output.js';
import { progressDisplay, type ProgressDisplay } from './progress-display.js';

const MARK: Record<string, string> = {
  pending: '⏸', ready: '·', claimed: '…', running: '▶', validating: '?', waiting: '⏳', completed: '✔',
  failed: '✖', retrying: '↻', dead_lettered: '☠', cancelled: '⊘',
};

export type DagSnapshot = Awaited<ReturnType<typeof dagStatus>>;

/**
 * Live progress of one DAG: each poll shows the tasks whose status changed since the last one
 * (and tasks spawned meanwhile) as lines with a done/total count, then the status line.
 */
export class DagProgress {
  private readonly seen = new Map<string, string>();
  private readonly startedAt = Date.now();

  constructor(private readonly db: Db, readonly dagId: string, private readonly display: Pick<ProgressDisplay, 'transition' | 'status'>) {}

  /** Read the DAG once, print what changed, and return the snapshot. */
  async poll(): Promise<DagSnapshot> {
    const s = await dagStatus(this.db, this.dagId);
    const total = s.tasks.length;
    const done = s.tasks.filter((t) => t.status === 'completed').length;
    const width = Math.min(40, Math.max(12, ...s.tasks.map((t) => t.key.length)));
    for (const t of s.tasks) {
      const before = this.seen.get(t.id);
      if (before === t.status) continue;
      this.seen.set(t.id, t.status);
      if (before === undefined && t.status === 'pending' && !t.parentId) continue; // the initial plan is not news
      const who = t.claimedBy && ['claimed', 'running', 'completed'].includes(t.status) ? ` on ${t.claimedBy}` : '';
      const why = t.status === 'pending' && before ? ' (waiting for subtasks)'
        : ['retrying', 'dead_lettered', 'failed'].includes(t.status) && t.lastError ? `: ${t.lastError.split('\n')[0]}` : '';
      const spawned = before === undefined && t.parentId ? ' (spawned)' : '';
      const attempt = t.status === 'running' && t.attempts > 1 ? ` attempt ${t.attempts}` : '';
      this.display.transition(`${clock()} [${String(done).padStart(String(total).length)}/${total}] ${MARK[t.status] ?? ' '} ${t.key.padEnd(width)} ${t.status}${who}${attempt}${spawned}${why}`);
    }
    this.display.status(statusLine(s, Date.now() - this.startedAt));
    return s;
  }
}

/** `3/10 done · 2 running · 1 retrying · 0 dead-lettered · $0.42 · 1m05s`: the DAG at a glance. */
export function statusLine(s: DagSnapshot, elapsedMs: number): string {
  const count = (...states: string[]) => s.tasks.filter((t) => states.includes(t.status)).length;
  const cancelled = count('cancelled');
  const waiting = count('waiting');
  const sec = Math.floor(elapsedMs / 1000);
  const elapsed = sec >= 60 ? `${Math.floor(sec / 60)}m${String(sec % 60).padStart(2, '0')}s` : `${sec}s`;
  return [
    `${count('completed')}/${s.tasks.length} done`, `${count('claimed', 'running', 'validating')} running`, ...(waiting ? [`${waiting} waiting for a signal`] : []),
    `${count('failed', 'retrying')} retrying`,
    `${count('dead_lettered')} dead-lettered`, ...(cancelled ? [`${cancelled} cancelled`] : []), usd(s.dag.spentUsd), elapsed,
  ].join(' · ');
}

/** Follow a DAG on `io` until it is no longer running: transitions and a live status line (progress-display.ts). */
export async function dagWatch(db: Db, dagId: string, io: Io, intervalMs: number): Promise<DagSnapshot> {
  const display = await progressDisplay(io);
  try {
    return await dagProgressFollow(new DagProgress(db, dagId, display), intervalMs);
  } finally {
    display.end();
  }
}

/** Poll every `intervalMs` until the DAG is no longer running; returns the last snapshot. */
export async function dagProgressFollow(progress: DagProgress, intervalMs: number): Promise<DagSnapshot> {
  for (;;) {
    const s = await progress.poll();
    if (s.dag.status !== 'running') return s;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

function clock(): string {
  return new Date().toISOString().slice(11, 19);
}
