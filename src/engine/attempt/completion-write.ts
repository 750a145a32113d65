import { afterCommit, withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { taskCompleteMark, type HandedRow } from '../../db/queries/tasks-complete.js';
import { attemptsPreviousFor } from '../../db/queries/attempts.js';
import { claimedTaskOf, type ClaimedTask } from './claim.js';
import { taskLateDependentsRecount } from '../../db/queries/task-deps.js';
import { LIMITS, limitEnvName } from '../../config/index.js';
import { InvalidInputError } from '../../errors.js';
import { jsonPathFormat, jsonProblem, jsonSizeExceeds } from '../../json-guard.js';
import { attemptsEndedEmit, dagsFinishedEmit, engineEvents } from '../../observability/engine-events.js';
import type { TaskRef } from './refusal.js';
import type { AttemptSpend, CompletionInput, CompletionMode, CompletionResult, RefusedRow } from '../../db/rows.js';

/** An output (and what producing it cost) reported for a held task. */
export interface Completion extends TaskRef, AttemptSpend {
  output: unknown;
}

/** The spend of a report, without the rest of it. */
export function spendOf(c: AttemptSpend): AttemptSpend {
  return { costUsd: c.costUsd, tokensIn: c.tokensIn, tokensOut: c.tokensOut, model: c.model };
}

/**
 * Why an output cannot be stored (a NUL, an unpaired surrogate, nesting past
 * LIMITS.jsonDepth) or is over LIMITS.outputBytes as JSON, or null.
 */
export function outputProblem(output: unknown, maxBytes: number = LIMITS.outputBytes, maxDepth: number = LIMITS.jsonDepth): string | null {
  const bad = jsonProblem(output, maxDepth);
  if (bad) return `${jsonPathFormat('output', bad.path)}: ${bad.message}`;
  if (jsonSizeExceeds(output, maxBytes)) {
    const size = Buffer.byteLength(JSON.stringify(output) ?? '');
    const limit = maxBytes === LIMITS.outputBytes ? 'outputBytes' : 'mapOutputBytes';
    if (size > maxBytes) return `output is ${size} bytes as JSON; at most ${maxBytes} (${limitEnvName(limit)})`;
  }
  return null;
}

/** A completion as the statement's input row; `details` goes on the attempt (the verdicts that passed it). An output that cannot be stored is refused here. */
export function completionInput(c: TaskRef & { output: unknown } & AttemptSpend, details?: Record<string, unknown>, maxBytes?: number, maxDepth?: number): CompletionInput {
  const bad = outputProblem(c.output, maxBytes, maxDepth);
  if (bad) throw new InvalidInputError(`task ${c.taskId}: ${bad}`, { taskId: c.taskId });
  return { id: c.taskId, fence: c.fence, output: c.output, ...spendOf(c), ...(details ? { details } : {}) };
}

/**
 * Run the completion statement (outputs stored, attempts recorded, dependents
 * unblocked, DAGs counted down, spend charged) and tell this process's listeners.
 * Every task that becomes COMPLETED, validation tasks included, comes through here,
 * so the `completed` engine event (and the completion metric) counts each exactly once.
 */
export async function completionWrite(
  db: Db, items: CompletionInput[], mode: CompletionMode = {},
): Promise<CompletionResult & { handed: ClaimedTask[]; refused: Array<RefusedRow & { id: string }> }> {
  const { lateUpstreams, handed: handedRows, ...r } = await taskCompleteMark(db, items, mode);
  // Dependents added while these were completing may have been missed by the statement's snapshot.
  if (lateUpstreams.length > 0) await afterCommit(db, (top) => withTx(top, (tx) => taskLateDependentsRecount(tx, lateUpstreams)));
  if (r.completed.length > 0) engineEvents.emit('completed', { byType: r.completedByType });
  attemptsEndedEmit(() => {
    const done = new Set(r.completed);
    return items.filter((i) => done.has(i.id)).map((i) => ({ taskId: i.id, fence: i.fence }));
  });
  dagsFinishedEmit(r.dagsCompleted);
  return { ...r, handed: await handedTasks(db, handedRows, mode) };
}

/** The dependents a completion handed its agent, as a claim gives them (a re-run's history included), counted as claims. */
async function handedTasks(db: Db, rows: HandedRow[], mode: CompletionMode): Promise<ClaimedTask[]> {
  if (rows.length === 0 || !mode.handTo) return [];
  const history = await attemptsPreviousFor(db, rows);
  engineEvents.emit('claim', { agentId: mode.handTo.agentId, requested: rows.length, claimed: rows.map((r) => ({ type: r.type, waitSec: 0 })) });
  // A handed task names no model (tasks-hand-off.ts): the agent's models and the fleet's pauses do not apply.
  return rows.map((r) => claimedTaskOf(r, history.get(r.id) ?? [], [], [], mode.handTo!.start));
}
