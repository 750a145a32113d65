import type { Db } from '../../db/handle.js';
import type { TaskStepRow } from '../../db/rows.js';
import type { StepScope } from '../../model/step-scopes.js';
import { taskStepLatestGet, taskStepRecord, taskStepReplay, taskStepReplaysList, taskStepsList } from '../../db/queries/task-steps.js';
import { taskGet } from '../../db/queries/tasks-read.js';
import { LIMITS, limitEnvName } from '../../config/limits.js';
import { InvalidInputError, NotFoundError } from '../../errors.js';
import { jsonPathFormat, jsonProblem, stringProblem } from '../../json-guard.js';
import { holdRefusalRead, type TaskRef } from './refusal.js';

/**
 * Durable steps: a named piece of an attempt's work (an LLM call, a tool call) whose JSON result is recorded under
 * the holder's fence, so that a retry, a lost lease or a crash replays it instead of paying for it again. First write
 * wins; a write under a fence that no longer holds the task (or whose lease lapsed) is LEASE_LOST and records
 * nothing. The TypeScript runtime's ctx.step and PUT /api/tasks/:id/steps/:name both come through here.
 */

/** Longest step name, in characters. */
export const STEP_NAME_MAX = 200;

export type { StepScope } from '../../model/step-scopes.js';
export type { TaskStepRow } from '../../db/rows.js';

/** Why a step name cannot be used (empty, too long, a control character, not storable), or null. */
export function stepNameProblem(name: unknown): string | null {
  if (typeof name !== 'string') return 'must be a string';
  if (name.length === 0 || name.length > STEP_NAME_MAX) return `must be 1-${STEP_NAME_MAX} characters, not ${name.length}`;
  // Printable: no C0/C1 control characters (a newline would forge lines in logs and listings).
  // eslint-disable-next-line no-control-regex
  if (/\p{Cc}/u.test(name)) return 'must not contain control characters';
  return stringProblem(name);
}

/** The step name, checked: an InvalidInputError naming the field and the step. */
export function stepNameCheck(name: unknown, field = 'name'): string {
  const bad = stepNameProblem(name);
  if (bad) throw new InvalidInputError(`step ${JSON.stringify(name)}: ${field} ${bad}`, { field });
  return name as string;
}

/**
 * A step's result as the JSON text to record and its size: a value that cannot be stored (nesting past
 * LIMITS.jsonDepth, a NUL, an unpaired surrogate) or is over LIMITS.stepResultBytes is an InvalidInputError naming
 * the step and the limit. `undefined` is recorded as null. `encoded`: `result` as JSON text already (the runtime's
 * normalizing round trip made it), so it is not encoded twice.
 */
export function stepResultEncode(name: string, result: unknown, field = 'result', encoded?: string): { json: string; sizeBytes: number } {
  const bad = jsonProblem(result ?? null, LIMITS.jsonDepth);
  if (bad) throw new InvalidInputError(`step ${JSON.stringify(name)}: ${jsonPathFormat(field, bad.path)}: ${bad.message}`, { field, step: name });
  let json = encoded;
  if (json === undefined) {
    try {
      json = JSON.stringify(result ?? null) ?? 'null';
    } catch (e) {
      throw new InvalidInputError(`step ${JSON.stringify(name)}: ${field} cannot be stored as JSON: ${(e as Error).message}`, { field, step: name });
    }
  }
  const sizeBytes = Buffer.byteLength(json);
  if (sizeBytes > LIMITS.stepResultBytes) {
    throw new InvalidInputError(
      `step ${JSON.stringify(name)}: ${field} is ${sizeBytes} bytes as JSON; at most ${LIMITS.stepResultBytes} (stepResultBytes, ${limitEnvName('stepResultBytes')}); nothing was recorded`,
      { field, step: name, limit: 'stepResultBytes' },
    );
  }
  return { json, sizeBytes };
}

/** What an attempt spent inside a step, as it reports it. */
export interface StepSpend { costUsd?: number; tokensIn?: number; tokensOut?: number; model?: string | null }

export interface StepWrite extends TaskRef, StepSpend {
  name: string;
  result: unknown;
  /** `result` as JSON text, when the caller has it already. */
  resultJson?: string;
  scope?: StepScope;
  durationMs?: number;
  startedAt?: Date;
}

/**
 * Record a step's result under the holder's fence, or return the one already recorded by that name (first write
 * wins: an earlier attempt's, or this fence's own whose reply was lost; `recorded: false`). A fence that no longer
 * holds the task, or whose lease lapsed, is LEASE_LOST and records nothing; past LIMITS.stepsPerTask or
 * LIMITS.stepBytesPerTask, an InvalidInputError naming the limit.
 */
export async function stepRecord(db: Db, w: StepWrite): Promise<{ step: TaskStepRow; recorded: boolean }> {
  const name = stepNameCheck(w.name);
  const { json, sizeBytes } = stepResultEncode(name, w.result, 'result', w.resultJson);
  const r = await taskStepRecord(db, {
    taskId: w.taskId, fence: w.fence, name, scope: w.scope ?? 'task', resultJson: json, sizeBytes,
    durationMs: w.durationMs === undefined ? null : Math.max(0, Math.round(w.durationMs)),
    costUsd: w.costUsd, tokensIn: w.tokensIn, tokensOut: w.tokensOut, model: w.model, startedAt: w.startedAt,
  }, { steps: LIMITS.stepsPerTask, bytes: LIMITS.stepBytesPerTask });
  switch (r.kind) {
    case 'recorded':
    case 'existing':
      return { step: r.step, recorded: r.kind === 'recorded' };
    case 'full':
      if (r.steps >= LIMITS.stepsPerTask) {
        throw new InvalidInputError(
          `task ${w.taskId}: step ${JSON.stringify(name)}: the task has recorded ${r.steps} steps, the most it may (stepsPerTask, ${limitEnvName('stepsPerTask')}); nothing was recorded`,
          { taskId: w.taskId, step: name, limit: 'stepsPerTask' },
        );
      }
      throw new InvalidInputError(
        `task ${w.taskId}: step ${JSON.stringify(name)}: the task's steps hold ${r.bytes} bytes, and ${sizeBytes} more would pass ${LIMITS.stepBytesPerTask} (stepBytesPerTask, ${limitEnvName('stepBytesPerTask')}); nothing was recorded`,
        { taskId: w.taskId, step: name, limit: 'stepBytesPerTask' },
      );
    case 'refused':
      throw await holdRefusalRead(db, w, r.task);
    default: {
      const never: never = r;
      throw new Error(`unknown step record result ${JSON.stringify(never)}`);
    }
  }
}

/**
 * The task-scoped step by that name for the holder `ref` to replay; undefined when none was recorded. One recorded by
 * an earlier claim is a replay, recorded with what the step had cost (this attempt does not pay it again). Refused
 * (LEASE_LOST, or NOT_FOUND for no such task) under the record's guard, so a holder that lost the task learns it
 * before it pays for the work rather than when its record is refused.
 */
export async function stepReplay(db: Db, ref: TaskRef, name: string): Promise<TaskStepRow | undefined> {
  const r = await taskStepReplay(db, ref.taskId, ref.fence, stepNameCheck(name));
  if (r.kind === 'refused') throw await holdRefusalRead(db, ref, r.task);
  return r.step;
}

/** The step by that name as a reader sees it (the task-scoped one, else the latest attempt's); NOT_FOUND when none. */
export async function stepShow(db: Db, taskId: string, name: string): Promise<TaskStepRow> {
  const step = await taskStepLatestGet(db, taskId, stepNameCheck(name));
  if (step) return step;
  // No task at all is said as such (what any unknown task id answers), not as a step it lacks.
  if (!(await taskGet(db, taskId))) throw new NotFoundError('task', taskId);
  throw new NotFoundError('step', `${JSON.stringify(name)} of task ${taskId}`);
}

/** A task's steps, without their results, in the order they were recorded; NOT_FOUND for an unknown task. */
export async function stepsList(db: Db, taskId: string): Promise<Array<Omit<TaskStepRow, 'result'>>> {
  const steps = await taskStepsList(db, taskId);
  if (steps.length === 0 && !(await taskGet(db, taskId))) throw new NotFoundError('task', taskId);
  return steps;
}

/** The steps a task's attempts replayed instead of running, in order; NOT_FOUND for an unknown task. */
export async function stepReplaysList(db: Db, taskId: string) {
  return taskStepReplaysList(db, taskId);
}
