import type { Db } from '../db/connection.js';
import { taskCompleteMark, type CompletionInput, type CompletionMode, type CompletionResult } from '../db/queries/tasks-complete.js';
import { engineEvents } from '../observability/engine-events.js';
import type { TaskRef } from './guard.js';

/** An output (and what producing it cost) reported for a held task. */
export interface Completion extends TaskRef {
  output: unknown;
  costUsd?: number;
  tokensIn?: number;
  tokensOut?: number;
  model?: string | null;
}

/** What an attempt reported spending, without its output. */
export type Spent = Pick<Completion, 'costUsd' | 'tokensIn' | 'tokensOut' | 'model'>;

export function spentOf(c: Spent): Spent {
  return { costUsd: c.costUsd, tokensIn: c.tokensIn, tokensOut: c.tokensOut, model: c.model };
}

/** A completion as the statement's input row; `details` goes on the attempt (the verdicts that passed it). */
export function completionInput(c: TaskRef & { output: unknown } & Spent, details?: Record<string, unknown>): CompletionInput {
  return { id: c.taskId, fence: c.fence, output: c.output, ...spentOf(c), ...(details ? { details } : {}) };
}

/**
 * Run the completion statement (outputs stored, attempts recorded, dependents
 * unblocked, DAGs counted down, spend charged) and tell this process's listeners.
 * Every task that becomes COMPLETED, validation tasks included, comes through here,
 * so the `completed` engine event (and the completion metric) counts each exactly once.
 */
export async function completionWrite(db: Db, items: CompletionInput[], mode: CompletionMode = {}): Promise<CompletionResult> {
  const r = await taskCompleteMark(db, items, mode);
  if (r.completed.length > 0) engineEvents.emit('completed', { byType: r.completedByType });
  return r;
}
