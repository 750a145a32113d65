import type { TaskSpec } from '../../dag/spec.js';
import { claimGroupKey, modelsAccepted } from '../../db/queries/capability-groups.js';
import type { TaskInsert } from '../../db/queries/tasks-intake.js';
import { APPROVAL_WAIT_PREFIX, MAP_WAIT_PREFIX } from '../../db/queries/signals.js';
import { priorityConstants } from '../../model/priority.js';

/** A task's run-time estimate and upward rank (engine/dag/critical-path.ts computes them for a DAG). */
export interface TaskPlan { estimateSec: number; cpRankSec: number }

/**
 * The row of a new task (taskInsertMany decides its state); `parentId` is set for tasks spawned at runtime.
 * `plan` is its estimate and upward rank (default: the default estimate, as a DAG of one).
 */
export function taskRow(t: TaskSpec, dagId: string, id: string, parentId?: string, plan?: TaskPlan): TaskInsert {
  const estimateSec = plan?.estimateSec ?? t.estimateSec ?? priorityConstants().defaultEstimateSec;
  const models = modelsAccepted(t.body);
  return {
    id,
    dagId,
    key: t.key,
    parentId,
    type: t.type,
    title: t.title,
    // A for_each task keeps its list in its spec: the waits loop maps over it (engine/dag/map.ts).
    spec: t.forEach ? { ...t.body, forEach: t.forEach } : t.body,
    contextKeys: [...new Set(t.body.context.map((ref) => ref.split('.')[0]!))],
    requiredCapabilities: t.requiredCapabilities,
    models,
    capKey: claimGroupKey({ capabilities: t.requiredCapabilities, models }),
    maxCostUsd: t.maxCostUsd,
    maxTokens: t.maxTokens ?? null,
    estimatedTokens: t.estimatedTokens ?? null,
    maxDurationSec: t.maxDurationSec,
    heartbeatSec: t.heartbeatSec,
    priority: t.priority,
    boostPerMinute: t.boostPerMinute,
    estimateSec,
    cpRankSec: plan?.cpRankSec ?? estimateSec,
    deadline: t.deadline,
    runAt: t.notBefore,
    depsRemaining: t.dependsOn.length,
    maxAttempts: t.maxAttempts,
    retryPolicy: t.retry,
    idempotencyKey: t.idempotencyKey,
    outputSpec: t.output,
    tags: t.tags,
    origin: t.origin ?? 'dag',
    concKey: t.concurrency?.key ?? null,
    concLimit: t.concurrency?.limit ?? null,
    // An approval or for_each task waits on a key of its own that no signal can reach (a signal key has no `/`).
    waitKey: t.approval ? `${APPROVAL_WAIT_PREFIX}${id}` : t.forEach ? `${MAP_WAIT_PREFIX}${id}` : t.waitFor?.signal ?? null,
    waitTimeoutSec: waitTimeout(t.approval?.timeoutSec ?? t.waitFor?.timeoutSec),
  };
}

function waitTimeout(sec: number | undefined): number | null {
  return sec === undefined ? null : Math.ceil(sec);
}
