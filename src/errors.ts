/**
 * Every error dagent raises on purpose is a DagentError with a stable `code`.
 * The CLI maps them to exit codes in one place (src/cli/exit-codes.ts).
 */
export class DagentError extends Error {
  readonly code: string;
  readonly details: Record<string, unknown>;
  constructor(code: string, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }
}

/** One problem in a DAG file, located at file:line:column and a field path. */
export interface SpecProblem {
  file: string;
  line: number;
  column: number;
  path: string;
  message: string;
}

export function formatProblem(p: SpecProblem): string {
  return `${p.file}:${p.line}:${p.column} ${p.path ? `${p.path}: ` : ''}${p.message}`;
}

/** A DAG file (or spec) is invalid. Carries every problem found, each with its location. */
export class DagValidationError extends DagentError {
  readonly problems: SpecProblem[];
  constructor(problems: SpecProblem[]) {
    super('DAG_INVALID', problems.map(formatProblem).join('\n'), { problems });
    this.problems = problems;
  }
}

/** Adding these edges would close a cycle; `cycle` is the path, first node repeated at the end. */
export class CycleError extends DagentError {
  readonly cycle: string[];
  constructor(cycle: string[], context = '') {
    super('CYCLE', `${context}dependency cycle: ${cycle.join(' -> ')}`, { cycle });
    this.cycle = cycle;
  }
}

/** Bad input from a user that is not a DAG file (an unknown id, a bad --param, a bad status filter). */
export class InvalidInputError extends DagentError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('INVALID_INPUT', message, details);
  }
}

export class NotFoundError extends DagentError {
  constructor(what: string, id: string) {
    super('NOT_FOUND', `${what} ${id} not found`, { what, id });
  }
}

/** A task is not in a state from which the requested transition is allowed. */
export class IllegalTransitionError extends DagentError {
  constructor(taskId: string, transition: string, actual: string, allowed: readonly string[]) {
    super(
      'ILLEGAL_TRANSITION',
      `task ${taskId}: cannot ${transition} from state ${actual} (allowed from: ${allowed.join(', ')})`,
      { taskId, transition, actual, allowed },
    );
  }
}

/** The caller's fencing token is stale: another claim owns the task now (or nobody does). */
export class LeaseLostError extends DagentError {
  constructor(taskId: string, presentedFence: number, currentFence: number, status: string) {
    super(
      'LEASE_LOST',
      `task ${taskId}: fencing token ${presentedFence} is stale (current ${currentFence}, status ${status})`,
      { taskId, presentedFence, currentFence, status },
    );
  }
}

/** An idempotency key is already taken by another DAG or task. */
export class ConflictError extends DagentError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('CONFLICT', message, details);
  }
}

/** Spending more would exceed a budget (the DAG's budget_usd). */
export class BudgetExceededError extends DagentError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('BUDGET_EXCEEDED', message, details);
  }
}

/** Too much work is queued (READY + PENDING at the configured limit): the submission was refused and nothing written. */
export class BackpressureError extends DagentError {
  readonly retryAfterSec: number;
  constructor(queued: number, limit: number, retryAfterSec: number) {
    super('BACKPRESSURE', `queue full: ${queued} tasks READY or PENDING (limit ${limit}); nothing was submitted, retry in ${retryAfterSec}s`, { queued, limit, retryAfterSec });
    this.retryAfterSec = retryAfterSec;
  }
}

/** The caller is authenticated but may not do this (an agent token acting for another agent, say). */
export class ForbiddenError extends DagentError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('FORBIDDEN', message, details);
  }
}
