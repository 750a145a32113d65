import type { WorkspaceAttemptState } from '../db/queries/tasks-workspaces.js';
import { HELD_STATES } from '../model/state-machine.js';
import { workspaceEntries, type WorkspaceEntry } from './layout.js';
import { workspaceDetach, workspaceRemove } from './workspace.js';

/** Where the attempt a worktree was made for stands, as the database says. */
export type AttemptState = WorkspaceAttemptState;

/**
 * `live`: its attempt still holds the task (claimed, running, or its output under validation, whose test steps
 * run in it). `kept`: the attempt failed by its own doing, the task says keep: on_failure, and the retention
 * (`keptSec`, null: for ever) has not run out. `remove`: anything else — completed, failed, dead-lettered,
 * cancelled, released, its lease lost, its agent killed (a `crash`: nothing worth debugging was left on purpose).
 */
export type WorkspaceFate = 'live' | 'kept' | 'remove';

export function workspaceFate(e: Pick<WorkspaceEntry, 'fence' | 'meta'>, s: AttemptState | undefined, now: number, keptSec: number | null): WorkspaceFate {
  if (!s || s.taskStatus === null) return 'remove';
  if (s.taskFence === e.fence && (HELD_STATES as readonly string[]).includes(s.taskStatus)) return 'live';
  const failedItself = s.outcome === 'failed' && s.errorClass !== 'crash';
  if (e.meta?.keep === 'on_failure' && failedItself) {
    if (keptSec === null) return 'kept';
    if (s.endedAt && now - s.endedAt.getTime() < keptSec * 1000) return 'kept';
  }
  return 'remove';
}

export interface ReclaimOptions {
  root: string;
  /** Where each entry's attempt stands (one statement for them all). */
  states: (refs: Array<{ taskId: string; fence: number }>) => Promise<AttemptState[]>;
  /** Seconds a kept worktree stays after its attempt ended (DAGENT_RETENTION_WORKSPACES); null: until removed by hand. */
  keptSec: number | null;
  /** The clock (ms); tests pass their own. Default Date.now. */
  now?: () => number;
  /** Only this task's worktrees, in its repository's folder: the start of the task's next attempt. */
  only?: { repo: string; dagId: string; taskId: string };
}

/**
 * Remove every worktree under the root whose attempt ended (kept ones stay, detached, until their retention runs
 * out), and what is left of ones a killed process was making. Returns how many it removed.
 */
export async function workspacesReclaim(o: ReclaimOptions): Promise<{ removed: number; kept: number; live: number }> {
  const entries = await workspaceEntries(o.root, o.only);
  const counts = { removed: 0, kept: 0, live: 0 };
  if (entries.length === 0) return counts;
  const states = new Map((await o.states(entries.map((e) => ({ taskId: e.taskId, fence: e.fence })))).map((s) => [`${s.taskId}-${s.fence}`, s]));
  const now = (o.now ?? Date.now)();
  for (const e of entries) {
    const fate = workspaceFate(e, states.get(`${e.taskId}-${e.fence}`), now, o.keptSec);
    if (fate === 'live') counts.live++;
    else if (fate === 'kept') {
      await workspaceDetach(e);
      counts.kept++;
    } else {
      await workspaceRemove(e);
      counts.removed++;
    }
  }
  return counts;
}
