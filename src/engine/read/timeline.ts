import type { Db } from '../../db/handle.js';
import { dagGet } from '../../db/queries/dags.js';
import {
  timelineCostByModel, timelineEdges, timelineSteps, timelineTasks, type TimelineStepRow, type TimelineReplayRow, type TimelineTaskRow,
} from '../../db/queries/timeline.js';
import { NotFoundError } from '../../errors.js';
import type { StepScope } from '../../model/step-scopes.js';
import { taskKeyCompare } from '../../model/task-key-order.js';

/** What a task was doing over a stretch of time. */
export type SegmentKind = 'queued' | 'running' | 'validating' | 'retry_wait' | 'waiting';

export interface TimelineSegment {
  kind: SegmentKind;
  from: Date;
  to: Date;
  /** For running and validating: the attempt's number and how it ended (`running` while it runs). */
  attempt?: number;
  outcome?: string;
  model?: string | null;
}

/** A durable step an attempt recorded: its work from `from` to `to` (when it was recorded). */
export interface TimelineStep {
  name: string; scope: StepScope; attempt: number; fence: number; costUsd: number; durationMs: number | null;
  from: Date; to: Date;
}

/** A durable step an attempt replayed at `replayedAt` instead of running: `costUsd` was not paid again. */
export type TimelineReplay = Omit<TimelineReplayRow, 'taskId'>;

export interface TimelineTask {
  id: string; key: string; type: string; status: string; parentKey: string | null; costUsd: number;
  /** On the path that decided when the DAG finished (or got as far as it has). */
  critical: boolean;
  segments: TimelineSegment[];
  /** The durable steps its attempts recorded, in the order recorded, and those they replayed. */
  steps: TimelineStep[];
  replays: TimelineReplay[];
}

export interface DagTimeline {
  dagId: string;
  from: Date;
  /** When the DAG finished, else now. */
  to: Date;
  tasks: TimelineTask[];
  /** Task keys from the first task to the last, each waiting on the one before. */
  criticalPath: string[];
  costByModel: Array<{ model: string | null; costUsd: number; tokensIn: number; tokensOut: number; attempts: number }>;
}

/**
 * A DAG's attempts as a Gantt chart: per task, queued (READY, no agent yet), running (an attempt, by outcome),
 * validating (its output with a validation task), retry waits (after a failure, until the next claim) and waiting
 * (for the subtasks an attempt spawned, until it is claimed again); the
 * critical path as it happened: from the task that finished last back through, at each step, the upstream task
 * that finished last (what it waited for); and what it cost per model. Validation tasks show as their
 * validated task's validating stretches. Each task carries the durable steps its attempts recorded and replayed.
 */
export async function dagTimeline(db: Db, dagId: string, now: Date = new Date()): Promise<DagTimeline> {
  const dag = await dagGet(db, dagId);
  if (!dag) throw new NotFoundError('DAG', dagId);
  const [rows, edges, costByModel, steps] = await Promise.all([
    timelineTasks(db, dagId), timelineEdges(db, dagId), timelineCostByModel(db, dagId), timelineSteps(db, dagId),
  ]);
  const end = dag.completedAt ?? now;
  const keyOf = new Map(rows.map((r) => [r.id, r.key]));
  const stepsOf = groupByTask(steps.steps);
  const replaysOf = groupByTask(steps.replays);
  const tasks = rows.map((r): TimelineTask => ({
    id: r.id, key: r.key, type: r.type, status: r.status, parentKey: r.parentId ? keyOf.get(r.parentId) ?? null : null,
    costUsd: r.costUsd, critical: false, segments: segmentsOf(r, end),
    steps: (stepsOf.get(r.id) ?? []).map((st) => stepOf(st, r, dag.createdAt)),
    replays: (replaysOf.get(r.id) ?? []).map(({ taskId: _t, ...x }) => x),
  }));
  const criticalPath = criticalPathOf(rows, edges, end);
  const onPath = new Set(criticalPath);
  for (const t of tasks) t.critical = onPath.has(t.id);
  const firstStart = (t: TimelineTask) => t.segments[0]?.from.getTime() ?? Infinity;
  // Those that began at once (a DAG's first tasks, queued from its submit) in key order: w2 before w10.
  tasks.sort((a, b) => firstStart(a) - firstStart(b) || taskKeyCompare(a.key, b.key));
  return { dagId, from: dag.createdAt, to: end, tasks, criticalPath: criticalPath.map((id) => keyOf.get(id)!), costByModel };
}

function groupByTask<T extends { taskId: string }>(rows: T[]): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const x of rows) {
    const list = out.get(x.taskId);
    if (list) list.push(x);
    else out.set(x.taskId, [x]);
  }
  return out;
}

/**
 * A recorded step's stretch: from when its work began (as its agent said, else its recording less the duration it
 * said, else the recording itself) to its recording. What an agent says is its own word: the start is kept within
 * its attempt (from the claim of that fence on), so a made-up one cannot stretch the chart.
 */
function stepOf(st: TimelineStepRow, r: TimelineTaskRow, dagFrom: Date): TimelineStep {
  const to = st.recordedAt;
  const said = st.startedAt ?? (st.durationMs !== null ? new Date(to.getTime() - st.durationMs) : to);
  // The attempt's row when it has ended; else it is the attempt in progress.
  const attemptFrom = r.attempts.find((a) => a.fence === st.fence)?.startedAt ?? r.claimedAt ?? dagFrom;
  const from = new Date(Math.min(to.getTime(), Math.max(said.getTime(), attemptFrom.getTime(), dagFrom.getTime())));
  return { name: st.name, scope: st.scope, attempt: st.attempt, fence: st.fence, costUsd: st.costUsd, durationMs: st.durationMs, from, to };
}

function segmentsOf(r: TimelineTaskRow, now: Date): TimelineSegment[] {
  const out: TimelineSegment[] = [];
  // A stretch of no length is left out, except an attempt's run: one claimed and finished within the millisecond the
  // times are read at is still an attempt (it showed as nothing, and a test that ran fast failed on it).
  const push = (s: TimelineSegment) => {
    if (s.to.getTime() > s.from.getTime() || (s.kind === 'running' && s.to.getTime() === s.from.getTime())) out.push(s);
  };
  // It could start once it existed and its upstream tasks were done; upstream tasks done after its first attempt
  // are the subtasks that attempt spawned (they are its upstream now).
  const first = r.attempts[0]?.startedAt ?? r.claimedAt;
  const up = r.upstreamDoneAt;
  let free = up && up > r.createdAt && (!first || up <= first) ? up : r.createdAt;
  let lastOutcome: string | null = null;
  // After a failure, the retry's wait; after an attempt that spawned subtasks to wait for, the subtasks' run.
  const wait = (until: Date) => push({ kind: lastOutcome === 'failed' ? 'retry_wait' : lastOutcome === 'waiting' ? 'waiting' : 'queued', from: free, to: until });
  for (const a of r.attempts) {
    if (a.startedAt > free) wait(a.startedAt);
    const running = { attempt: a.attempt, outcome: a.outcome, model: a.model };
    if (a.outcome === 'validating') {
      // Its output is with a validation task now.
      push({ kind: 'running', from: a.startedAt, to: a.endedAt, ...running });
      push({ kind: 'validating', from: a.endedAt, to: now, attempt: a.attempt });
    } else {
      const handedOff = r.validatingAt.find((v) => v > a.startedAt && v < a.endedAt);
      push({ kind: 'running', from: a.startedAt, to: handedOff ?? a.endedAt, ...running });
      if (handedOff) push({ kind: 'validating', from: handedOff, to: a.endedAt, attempt: a.attempt, outcome: a.outcome });
    }
    free = a.endedAt > free ? a.endedAt : free;
    lastOutcome = a.outcome;
  }
  if (r.claimedAt) {
    if (r.claimedAt > free) wait(r.claimedAt);
    push({ kind: 'running', from: r.claimedAt, to: now, attempt: r.attempts.length + 1, outcome: 'running' });
  } else if (r.status === 'ready' || r.status === 'retrying' || (r.status === 'pending' && lastOutcome === 'waiting')) {
    if (r.status === 'retrying') lastOutcome = 'failed';
    wait(now);
  }
  return out;
}

/** The realized critical path, as task ids from first to last. */
function criticalPathOf(rows: TimelineTaskRow[], edges: Array<{ upstreamId: string; downstreamId: string }>, now: Date): string[] {
  const doneAt = new Map<string, number>();
  for (const r of rows) {
    const end = r.completedAt ?? (r.claimedAt ? now : r.attempts.at(-1)?.endedAt ?? null);
    if (end) doneAt.set(r.id, end.getTime());
  }
  const upstreams = new Map<string, string[]>();
  for (const e of edges) upstreams.set(e.downstreamId, [...(upstreams.get(e.downstreamId) ?? []), e.upstreamId]);
  let at: string | undefined;
  for (const [id, t] of doneAt) if (at === undefined || t > doneAt.get(at)!) at = id;
  const path: string[] = [];
  const seen = new Set<string>();
  while (at !== undefined && !seen.has(at)) {
    seen.add(at);
    path.push(at);
    let next: string | undefined;
    for (const u of upstreams.get(at) ?? []) if (doneAt.has(u) && (next === undefined || doneAt.get(u)! > doneAt.get(next)!)) next = u;
    at = next;
  }
  return path.reverse();
}
