import type { DagSpec, ForEachSpec, SpawnPolicy, TaskBody, TaskSpec } from '../../dag/spec.js';
import type { ApprovalStep } from '../../validation/steps/approval.js';
import type { DagRow, TaskRow } from '../../db/rows.js';
import { APPROVAL_WAIT_PREFIX, MAP_WAIT_PREFIX } from '../../db/queries/signals.js';
import { ConflictError } from '../../errors.js';

/**
 * A finished DAG's spec, rebuilt from its rows for a rerun with a change (rerun-changed.ts): the tasks its author
 * wrote (not the subtasks agents spawned, a for_each task's children, or the validation tasks the engine added),
 * each as it was stored at submit (params filled in, defaults applied), with the dependencies its edges hold now
 * (an edge an operator added at runtime included). Rebuilt from the rows rather than read again from its file: the
 * file may have changed since, and the rows are what ran.
 *
 * What is not carried: idempotency keys (the DAG's and its tasks' are taken by the original), a schedule (a rerun
 * runs once, now), not_before (a task's run_at was moved by its retries). A deadline keeps its distance from the
 * DAG's creation: one written `2h` is again two hours after the rerun's.
 */
export interface RebuiltDag {
  spec: DagSpec;
  /** The original row of each rebuilt task, by key. */
  rows: Map<string, TaskRow>;
}

/** Whether a row is a task the DAG's author wrote (a group's task included): not spawned, mapped or added to validate. */
export function taskIsAuthored(t: Pick<TaskRow, 'parentId' | 'validatesId'>): boolean {
  return t.parentId === null && t.validatesId === null;
}

/**
 * The DAG's spec from its rows and edges. Refused (409) when a task its author wrote waits for a subtask another
 * task spawned (an edge added at runtime): the rebuilt DAG would drop that subtask, and with it what the task waited for.
 */
export function dagSpecRebuild(dag: DagRow, rows: readonly TaskRow[], edges: ReadonlyArray<{ upstreamId: string; downstreamId: string }>): RebuiltDag {
  const byId = new Map(rows.map((r) => [r.id, r]));
  const authored = rows.filter(taskIsAuthored);
  const upstream = new Map<string, string[]>(authored.map((r) => [r.id, []]));
  for (const e of edges) {
    const down = byId.get(e.downstreamId);
    const up = byId.get(e.upstreamId);
    if (!down || !up || !taskIsAuthored(down)) continue;
    if (taskIsAuthored(up)) upstream.get(down.id)!.push(up.key);
    // A task waits for the subtasks it spawned itself (spawn with wait, a for_each's children): it runs again whole, or is carried whole.
    else if (up.parentId !== down.id) {
      const parent = up.parentId ? byId.get(up.parentId)?.key ?? up.parentId : '?';
      throw new ConflictError(
        `DAG ${dag.id}: task ${down.key} waits for ${up.key}, a subtask ${parent} spawned at runtime; a rerun rebuilds the tasks the DAG's author wrote, and ${down.key} would lose that upstream task: submit the DAG file again instead`,
        { dagId: dag.id, taskKey: down.key, upstreamKey: up.key },
      );
    }
  }
  const createdMs = dag.createdAt.getTime();
  const tasks = authored.map((r) => taskSpecOf(r, upstream.get(r.id)!.sort(), createdMs));
  const description = (dag.spec as { description?: string | null } | null)?.description ?? undefined;
  const spec: DagSpec = {
    name: dag.name,
    ...(dag.title !== null ? { title: dag.title } : {}),
    ...(description ? { description } : {}),
    params: (dag.params ?? {}) as DagSpec['params'],
    ...(dag.budgetUsd !== null ? { budgetUsd: dag.budgetUsd } : {}),
    ...(dag.dailyBudgetUsd !== null ? { dailyBudgetUsd: dag.dailyBudgetUsd } : {}),
    ...(dag.budgetLowAt !== null ? { budgetLowAt: dag.budgetLowAt } : {}),
    ...(dag.sourceFile !== null ? { sourceFile: dag.sourceFile } : {}),
    tasks,
    ...(dag.spawnPolicy ? { spawn: dag.spawnPolicy as SpawnPolicy } : {}),
  };
  return { spec, rows: new Map(authored.map((r) => [r.key, r])) };
}

/** A task row back as the spec it was inserted from (attempt/task-row.ts taskRow, read the other way). */
function taskSpecOf(r: TaskRow, dependsOn: string[], dagCreatedMs: number): TaskSpec {
  const { forEach, ...body } = r.spec as TaskBody & { forEach?: ForEachSpec };
  const waitKey = r.waitKey;
  const approval = waitKey?.startsWith(APPROVAL_WAIT_PREFIX) ? (body.input as { step: ApprovalStep }).step : undefined;
  const mapped = waitKey?.startsWith(MAP_WAIT_PREFIX) ? forEach : undefined;
  const signal = waitKey && !approval && !mapped ? waitKey : undefined;
  return {
    key: r.key,
    type: r.type,
    ...(r.title !== null ? { title: r.title } : {}),
    body,
    requiredCapabilities: r.requiredCapabilities,
    ...(r.maxCostUsd !== null ? { maxCostUsd: r.maxCostUsd } : {}),
    ...(r.maxTokens !== null ? { maxTokens: r.maxTokens } : {}),
    ...(r.estimatedTokens !== null ? { estimatedTokens: r.estimatedTokens } : {}),
    ...(r.maxDurationSec !== null ? { maxDurationSec: r.maxDurationSec } : {}),
    ...(r.heartbeatSec !== null ? { heartbeatSec: r.heartbeatSec } : {}),
    priority: r.priority,
    boostPerMinute: r.boostPerMinute,
    estimateSec: r.estimateSec,
    ...(r.deadline ? { deadline: { inSeconds: Math.max(0, (r.deadline.getTime() - dagCreatedMs) / 1000) } } : {}),
    dependsOn,
    maxAttempts: r.maxAttempts,
    retry: r.retryPolicy,
    ...(r.outputSpec ? { output: r.outputSpec as Record<string, unknown> } : {}),
    tags: r.tags,
    origin: r.origin as TaskSpec['origin'],
    ...(r.concKey !== null && r.concLimit !== null ? { concurrency: { key: r.concKey, limit: r.concLimit } } : {}),
    ...(signal ? { waitFor: { signal, ...(r.waitTimeoutSec !== null ? { timeoutSec: r.waitTimeoutSec } : {}) } } : {}),
    ...(approval ? { approval } : {}),
    ...(mapped ? { forEach: mapped } : {}),
  };
}
