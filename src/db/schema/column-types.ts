import { customType } from 'drizzle-orm/pg-core';
import { TASK_DEFAULTS, type RetryPolicy } from '../../dag/spec.js';

/** A full transaction id (pg_current_xact_id()), compared with pg_visible_in_snapshot. */
export const xid8 = customType<{ data: string }>({ dataType: () => 'xid8' });

/**
 * A task's retry policy as its row stores it: only the fields that differ from TASK_DEFAULTS.retry, so most tasks
 * store `{}` (5 bytes instead of 164). The row is written again at every state change, and that jsonb was 28 % of a
 * flat task's row and of each version's WAL (docs/benchmarks.md, "What a task writes").
 * A row from before holds the whole policy, which reads the same. A release that changes TASK_DEFAULTS.retry must
 * first write the old defaults into the rows that store less (a migration), or those tasks change policy with it.
 */
export function retryPolicyStored(policy: RetryPolicy): Partial<RetryPolicy> {
  const defaults: Partial<Record<keyof RetryPolicy, unknown>> = TASK_DEFAULTS.retry;
  return Object.fromEntries(Object.entries(policy).filter(([k, v]) => JSON.stringify(v) !== JSON.stringify(defaults[k as keyof RetryPolicy])));
}

/** The policy a stored retry_policy stands for (retryPolicyStored's inverse); for statements that read the column raw. */
export function retryPolicyOf(stored: unknown): RetryPolicy {
  const fields = typeof stored === 'string' ? JSON.parse(stored) as Partial<RetryPolicy> : stored as Partial<RetryPolicy> | null;
  return { ...TASK_DEFAULTS.retry, noRetryOn: [...TASK_DEFAULTS.retry.noRetryOn], ...fields };
}

/** tasks.retry_policy: jsonb holding retryPolicyStored; drizzle's reads and writes of the column go through it. */
export const retryPolicyColumn = customType<{ data: RetryPolicy; driverData: unknown }>({
  dataType: () => 'jsonb',
  toDriver: (policy) => JSON.stringify(retryPolicyStored(policy)),
  fromDriver: retryPolicyOf,
});
