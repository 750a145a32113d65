import type { Db } from '../db/connection.js';
import { dagStatus } from '../engine/inspect.js';

const MARK: Record<string, string> = {
  pending: '⏸', ready: '·', claimed: '…', running: '▶', validating: '?', completed: '✔',
  failed: '✖', retrying: '↻', dead_lettered: '☠', cancelled: '⊘',
};

export type DagSnapshot = Awaited<ReturnType<typeof dagStatus>>;

/**
 * Live progress of one DAG as lines: each poll prints the tasks whose status
 * changed since the last one (and tasks spawned meanwhile), with a done/total count.
 */
export class DagProgress {
  private readonly seen = new Map<string, string>();

  constructor(private readonly db: Db, readonly dagId: string, private readonly line: (s: string) => void) {}

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
      this.line(`${clock()} [${String(done).padStart(String(total).length)}/${total}] ${MARK[t.status] ?? ' '} ${t.key.padEnd(width)} ${t.status}${who}${attempt}${spawned}${why}`);
    }
    return s;
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
