import { DagentError, TaskError } from '../errors.js';

/** The provider refused for rate or quota reasons; worth retrying after a delay. */
export class RateLimitError extends TaskError {
  constructor(message: string, opts: { retryAfterSec?: number; cause?: unknown } = {}) {
    super('rate_limit', message, { details: opts.retryAfterSec === undefined ? {} : { retryAfterSec: opts.retryAfterSec }, cause: opts.cause });
  }
}

/** Credentials were refused: a retry cannot help, so it dead-letters at once. */
export class AuthFailureError extends TaskError {
  constructor(message: string, opts: { cause?: unknown } = {}) {
    super('auth_failure', message, { retryable: false, cause: opts.cause });
  }
}

/** The handler produced output it knows is unusable (unparseable, wrong shape). */
export class InvalidOutputError extends TaskError {
  constructor(message: string, opts: { cause?: unknown } = {}) {
    super('invalid_output', message, { cause: opts.cause });
  }
}

/** A failure no retry can fix: the task is dead-lettered at once for a human to look at. */
export class NonRetryableError extends TaskError {
  constructor(message: string, opts: { errorClass?: string; cause?: unknown } = {}) {
    super(opts.errorClass ?? 'fatal', message, { retryable: false, cause: opts.cause });
  }
}

export interface ClassifiedError {
  errorClass: string;
  message: string;
  retryable?: boolean;
  retryAfterSec?: number;
  /** Recorded on the attempt row (a TaskError's details, e.g. a command's exit code and output). */
  details?: Record<string, unknown>;
}

/** Error class, retryability and details of whatever a handler threw. */
export function errorClassify(err: unknown): ClassifiedError {
  if (isTaskError(err)) {
    const retryAfter = err.details?.retryAfterSec;
    return {
      errorClass: err.errorClass, message: err.message, retryable: err.retryable, details: err.details,
      ...(typeof retryAfter === 'number' ? { retryAfterSec: retryAfter } : {}),
    };
  }
  // Spawning past the DAG's budget: retrying cannot help until a human raises the budget.
  if (err instanceof DagentError && err.code === 'BUDGET_EXCEEDED') return { errorClass: 'budget_exceeded', message: err.message, retryable: false };
  const message = err instanceof Error ? err.message : String(err);
  return { errorClass: 'error', message: message || 'handler threw without a message' };
}

/**
 * By shape, not `instanceof`: an agent module importing `dagent` from the
 * package gets the built copy of these classes, while the CLI runs the sources.
 */
function isTaskError(err: unknown): err is TaskError {
  const e = err as Partial<TaskError> | null;
  return err instanceof TaskError
    || (typeof e === 'object' && e !== null && e.code === 'TASK_FAILED' && typeof e.errorClass === 'string' && typeof e.retryable === 'boolean');
}
