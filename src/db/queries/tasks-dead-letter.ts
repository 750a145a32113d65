import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { tasks } from '../schema/index.js';
import { fromStates } from '../../model/state-machine.js';
import { effectivePriorityOnReadySql } from '../../model/priority.js';
import { capabilityGroupsEnsure, claimGroupKey, modelsAccepted } from './capability-groups.js';
import { rowsOf, textArray } from '../statement.js';
import { readyNotifySql } from './ready-hint.js';

/** What a human does to a dead-lettered task: edit its spec, and send it back to READY. */

/** dead_lettered → ready (or pending if not_before is still ahead). Optionally restart the attempt budget. */
export async function taskDeadLetterRetry(db: Db, id: string, resetAttempts: boolean): Promise<boolean> {
  const r = await rowsOf<{ status: string }>(db, sql`
    with revived as (
      update tasks set
        status = case when run_at is null or run_at <= now() then 'ready' else 'pending' end,
        ready_at = now(), updated_at = now(), last_error = null, ${effectivePriorityOnReadySql()},
        attempts = case when ${resetAttempts} then 0 else attempts end,
        attempts_reset_fence = case when ${resetAttempts} then fence else attempts_reset_fence end
      where id = ${id} and status = any(${textArray(fromStates('dlqRetry'))})
      returning status, cap_key, tenant_id
    )
    select status, ${readyNotifySql(sql`revived`)} as notified from revived`);
  return r.length > 0;
}

/** A human's edit of a dead-lettered task's spec before it is retried (only the fields given change). */
export interface TaskEdit {
  title?: string;
  prompt?: string;
  input?: Record<string, unknown>;
  models?: string[];
  fallbackModels?: string[];
  requiredCapabilities?: string[];
  priority?: number;
  maxAttempts?: number;
  maxCostUsd?: number | null;
}

/**
 * Apply an edit to a DEAD_LETTERED task; false if it is not (any more) dead-lettered. `current` is the
 * task as read before the edit (its capabilities and models), for the claim group of the edited task.
 */
export async function taskDeadLetterEdit(
  db: Db, id: string, e: TaskEdit, current: { requiredCapabilities: string[]; models: string[]; fallbackModels: string[]; tenantId: string },
): Promise<boolean> {
  const body: Record<string, unknown> = {};
  if (e.prompt !== undefined) body.prompt = e.prompt;
  if (e.input !== undefined) body.input = e.input;
  if (e.models !== undefined) body.models = e.models;
  if (e.fallbackModels !== undefined) body.fallbackModels = e.fallbackModels;
  const capabilities = e.requiredCapabilities ?? current.requiredCapabilities;
  const models = modelsAccepted({ models: e.models ?? current.models, fallbackModels: e.fallbackModels ?? current.fallbackModels });
  const regroup = e.requiredCapabilities !== undefined || e.models !== undefined || e.fallbackModels !== undefined;
  if (regroup) await capabilityGroupsEnsure(db, [{ capabilities, models, tenant: current.tenantId }]);
  const r = await db.update(tasks).set({
    spec: sql`${tasks.spec} || ${JSON.stringify(body)}::jsonb`,
    ...(e.title !== undefined ? { title: e.title } : {}),
    ...(regroup ? { requiredCapabilities: capabilities, models, capKey: claimGroupKey({ capabilities, models }) } : {}),
    ...(e.priority !== undefined ? { priority: e.priority } : {}),
    ...(e.maxAttempts !== undefined ? { maxAttempts: e.maxAttempts } : {}),
    ...(e.maxCostUsd !== undefined ? { maxCostUsd: e.maxCostUsd } : {}),
    updatedAt: sql`now()`,
  }).where(and(eq(tasks.id, id), eq(tasks.status, 'dead_lettered'))).returning({ id: tasks.id });
  return r.length > 0;
}
