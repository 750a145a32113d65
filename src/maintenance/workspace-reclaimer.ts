import { stat } from 'node:fs/promises';
import path from 'node:path';
import { CONFIG_DEFAULTS, WORKSPACE_DEFAULTS } from '../config/index.js';
import { taskWorkspaceAttempts } from '../db/queries/tasks-workspaces.js';
import { durationSeconds } from '../durations.js';
import { lockFileTry } from '../workspaces/repo-lock.js';
import { workspacesReclaim } from '../workspaces/reclaim.js';
import { serviceCreate, type LoopIdentity, type LoopOptions, type MaintenanceService } from './service.js';

export interface WorkspaceReclaimerOptions extends LoopOptions {
  /** The workspace root of this machine (DAGENT_WORKSPACE_ROOT). Default CONFIG_DEFAULTS.workspaceRoot. */
  root?: string;
  /** Seconds a worktree kept after a failure stays (DAGENT_RETENTION_WORKSPACES); null: until removed by hand. Default WORKSPACE_DEFAULTS.keptPeriod. */
  keptSec?: number | null;
  intervalMs?: number;
  /** The clock (ms), for tests. Default Date.now. */
  now?: () => number;
}

/**
 * This loop in the registry (index.ts). Not gated by a lease: worktrees are on the disk of the machine that made
 * them, so each process sweeps its own root, one process per root at a time (a lock file in the root).
 */
export const WORKSPACE_RECLAIMER_LOOP = { name: 'workspace-reclaimer', gated: false } as const satisfies LoopIdentity;

/**
 * Removes the git worktrees whose attempt ended (src/workspaces/reclaim.ts: completed, failed, released, its lease
 * lost, its agent killed), keeping those kept after a failure (keep: on_failure) until DAGENT_RETENTION_WORKSPACES.
 * The start of a task's next attempt reclaims that task's; this pass finds the rest.
 */
export function workspaceReclaimerCreate(o: WorkspaceReclaimerOptions): MaintenanceService {
  const root = o.root ?? CONFIG_DEFAULTS.workspaceRoot;
  const log = o.log?.child({ service: WORKSPACE_RECLAIMER_LOOP.name });
  return serviceCreate({
    ...WORKSPACE_RECLAIMER_LOOP,
    db: o.db,
    log: o.log,
    leaseSec: o.leaseSec,
    intervalMs: o.intervalMs ?? WORKSPACE_DEFAULTS.intervalMs,
    async work() {
      // No root yet: this machine has made no worktree.
      if (!(await stat(root).then((st) => st.isDirectory(), () => false))) return 0;
      const r = await lockFileTry(path.join(root, 'reclaim.lock'), () => workspacesReclaim({
        root, keptSec: o.keptSec === undefined ? durationSeconds(WORKSPACE_DEFAULTS.keptPeriod) : o.keptSec,
        states: (refs) => taskWorkspaceAttempts(o.db, refs), now: o.now,
      }));
      if (r?.removed) log?.info({ ...r }, 'worktrees of ended attempts removed');
      return r?.removed ?? 0;
    },
  });
}
