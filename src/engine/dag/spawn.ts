import type { Logger } from 'pino';
import { attemptsEndedEmit } from '../../observability/engine-events.js';
import { withTxRetried } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { agentsLock } from '../../db/queries/agents.js';
import { dagGet } from '../../db/queries/dags.js';
import { taskLockLeased, taskWaitForChildren } from '../../db/queries/tasks-spawn.js';
import { SPAWN_POLICY_DEFAULT, subtaskSpecsParse } from '../../dag/subtask-spec.js';
import type { SpawnPolicy } from '../../dag/spec.js';
import { BudgetExceededError } from '../../errors.js';
import { subtasksAdd, type SpawnedChild } from './subtasks-add.js';
import { refusalExplain } from '../attempt/refusal.js';
import type { TaskRef } from '../attempt/refusal.js';
import type { AttemptSpend } from '../../db/rows.js';

export interface SpawnOptions {
  /**
   * True: the parent waits for its subtasks. Its current attempt ends without
   * counting (`waiting`), it goes PENDING on them and is claimed again once they
   * have all completed. Subtasks that already completed (a resumed handler
   * spawning the same keys again) are not waited for. Default false: fire and forget.
   */
  wait?: boolean;
  /** Cost the parent's attempt reported so far; recorded when a wait ends the attempt. */
  cost?: AttemptSpend;
  log?: Logger;
}

export type { SpawnedChild };

export interface SpawnResult {
  children: SpawnedChild[];
  /** True when the parent now waits: its attempt has ended and the agent must stop working on it. */
  waiting: boolean;
}

/**
 * Add subtasks (and edges among them) to the running task's DAG in one
 * transaction, each with parent_id set, under the DAG's graph lock and
 * cycle-checked like any other edge. Keys are idempotent per parent, so a
 * handler written as a resumable step may spawn the same subtasks on every run.
 */
export async function taskSpawn(db: Db, parent: TaskRef, specs: unknown, opts: SpawnOptions = {}): Promise<SpawnResult> {
  // Retried when chosen as a deadlock victim: it locks its parent, its agent and then upstream rows that completions hold.
  const result = await withTxRetried(db, async (tx) => {
    const p = await taskLockLeased(tx, parent.taskId, parent.fence);
    if (!p) return null;
    // A wait charges the parent's agent after the DAG's row was updated below: take the agent first (the lock order).
    if (opts.wait) await agentsLock(tx, [p.claimedBy]);
    const dag = (await dagGet(tx, p.dagId))!;
    const policy = (dag.spawnPolicy as SpawnPolicy | null) ?? SPAWN_POLICY_DEFAULT;
    const subtasks = await subtaskSpecsParse(specs, { priority: p.priority, policy, parent: p });
    if (dag.budgetUsd !== null && dag.spentUsd >= dag.budgetUsd) {
      throw new BudgetExceededError(`DAG ${dag.id} has spent ${dag.spentUsd} of its ${dag.budgetUsd} USD budget: no more subtasks`, { dagId: dag.id });
    }
    const added = await subtasksAdd(tx, p, subtasks, {
      wait: !!opts.wait, spawnLimit: policy.maxTasks, event: 'task.spawned',
      parentWait: (children) => {
        const c = opts.cost;
        return taskWaitForChildren(tx, { id: p.id, fence: parent.fence, children, ...c });
      },
    });
    return { ...added, dagId: p.dagId };
  });
  if (!result) return refusalExplain(db, parent, 'waitForChildren');
  const created = result.children.filter((c) => c.created).length;
  opts.log?.info({ taskId: parent.taskId, dagId: result.dagId, created, waiting: result.waiting }, 'subtasks spawned');
  if (result.waiting) attemptsEndedEmit(() => [{ taskId: parent.taskId, fence: parent.fence }]);
  return { children: result.children, waiting: result.waiting };
}
