/**
 * Every error dagent raises on purpose is a DagentError with a stable `code`.
 * ERROR_CODES at the bottom is the one table of codes: each code's class, HTTP
 * status, CLI exit code and description. The HTTP API, the CLI and the OpenAPI
 * document all read it; a code missing from it does not compile.
 */
export class DagentError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;
  constructor(code: ErrorCode, message: string, details: Record<string, unknown> = {}) {
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

/** Longest cycle path printed whole; a longer one shows its first and last keys and how many between. */
const CYCLE_KEYS_SHOWN = 12;

/** `a -> b -> c -> a`, or for a long cycle `k1 -> … -> k6 -> (4,988 more) -> k4995 -> … -> k1`. */
export function cyclePathText(cycle: string[]): string {
  if (cycle.length <= CYCLE_KEYS_SHOWN) return cycle.join(' -> ');
  const half = CYCLE_KEYS_SHOWN / 2;
  const hidden = cycle.length - CYCLE_KEYS_SHOWN;
  return [...cycle.slice(0, half), `(${hidden.toLocaleString('en-US')} more)`, ...cycle.slice(-half)].join(' -> ');
}

/** Adding these edges would close a cycle; `cycle` is the path, first node repeated at the end. */
export class CycleError extends DagentError {
  readonly cycle: string[];
  constructor(cycle: string[], context = '') {
    super('CYCLE', `${context}dependency cycle: ${cyclePathText(cycle)}`, { cycle });
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

/** A task (or DAG) is not in a state from which the requested transition is allowed. */
export class IllegalTransitionError extends DagentError {
  constructor(taskId: string, transition: string, actual: string, allowed: readonly string[]) {
    super(
      'ILLEGAL_TRANSITION',
      `task ${taskId}: cannot ${transition} from state ${actual} (allowed from: ${allowed.join(', ')})`,
      { taskId, transition, actual, allowed },
    );
  }
}

/** A DAG is not in a state that allows the action (cancelling a DAG that already finished). */
export class DagStateError extends DagentError {
  constructor(dagId: string, status: string, message: string) {
    super('ILLEGAL_TRANSITION', `DAG ${dagId} is ${status}: ${message}`, { dagId, status });
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

/** State and token matched on a second look: the row changed between the guarded UPDATE and the read that explains it. */
export class TransitionRacedError extends DagentError {
  constructor(taskId: string, transition: string, status: string) {
    super('TRANSITION_RACED', `task ${taskId}: ${transition} refused: the task changed meanwhile (now ${status})`, { taskId, transition });
  }
}

/** An idempotency key is already taken by another DAG or task. */
export class ConflictError extends DagentError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('CONFLICT', message, details);
  }
}

/** A dead letter was already retried or cancelled. */
export class DeadLetterResolvedError extends DagentError {
  constructor(id: string, resolution: string | null, resolvedAt: Date | null) {
    super('DLQ_RESOLVED', `dead letter ${id} was already resolved (${resolution} at ${resolvedAt?.toISOString()})`, { id });
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
  constructor(queued: number, limit: number, retryAfterSec: number, tenant?: string) {
    super('BACKPRESSURE', tenant === undefined
      ? `queue full: ${queued} tasks READY or PENDING (limit ${limit}); nothing was submitted, retry in ${retryAfterSec}s`
      : `tenant ${tenant} at its quota: ${queued} tasks not finished and this submit adds more (max_queued ${limit}); nothing was submitted, retry in ${retryAfterSec}s`,
    { queued, limit, retryAfterSec, ...(tenant === undefined ? {} : { tenant }) });
    this.retryAfterSec = retryAfterSec;
  }
}

/** No token, or one that is unknown or revoked. */
export class UnauthorizedError extends DagentError {
  constructor(message: string) {
    super('UNAUTHORIZED', message);
  }
}

/** The caller is authenticated but may not do this (an agent token acting for another agent, say). */
export class ForbiddenError extends DagentError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('FORBIDDEN', message, details);
  }
}

/** `dagent watch` followed a DAG that ended cancelled or blocked instead of completed. */
export class DagNotCompletedError extends DagentError {
  constructor(dagId: string, status: string, reason: string | null) {
    super('DAG_NOT_COMPLETED', `DAG ${dagId} is ${status}${reason ? `: ${reason}` : ''}`, { dagId, status });
  }
}

/**
 * Thrown by an agent's handler to choose how its failure is classified (the
 * runtime's RateLimitError, NonRetryableError and friends extend it). The error
 * class drives the task's retry policy; `retryable: false` dead-letters at once.
 */
export class TaskError extends DagentError {
  readonly errorClass: string;
  readonly retryable: boolean;
  constructor(errorClass: string, message: string, opts: { retryable?: boolean; details?: Record<string, unknown>; cause?: unknown } = {}) {
    super('TASK_FAILED', message, { errorClass, ...opts.details });
    this.errorClass = errorClass;
    this.retryable = opts.retryable ?? true;
    if (opts.cause !== undefined) this.cause = opts.cause;
  }
}

/** A request the HTTP server could not read (malformed JSON, say). */
export class BadRequestError extends DagentError {
  constructor(message: string) {
    super('BAD_REQUEST', message);
  }
}

/** A request body over the limit. */
export class BodyTooLargeError extends DagentError {
  constructor(limitBytes: number) {
    super('BODY_TOO_LARGE', `request body is larger than ${limitBytes} bytes`, { limitBytes });
  }
}

/** A request body in a content type the route does not read. */
export class UnsupportedMediaTypeError extends DagentError {
  constructor(message: string) {
    super('UNSUPPORTED_MEDIA_TYPE', message);
  }
}

/** A path parameter longer than the router reads. */
export class UriTooLongError extends DagentError {
  constructor(message: string) {
    super('URI_TOO_LONG', message);
  }
}

/** Request headers over the server's size limit. */
export class HeadersTooLargeError extends DagentError {
  constructor() {
    super('HEADERS_TOO_LARGE', 'request headers are larger than the server accepts');
  }
}

/** The client did not send the whole request in time. */
export class RequestTimeoutError extends DagentError {
  constructor() {
    super('REQUEST_TIMEOUT', 'the request was not received in time');
  }
}

/**
 * The database could not be reached (a restart, a network blip, no free connection): nothing
 * was done, or what was done is safe to report again (reports are idempotent). Retry after
 * `retryAfterSec`.
 */
export class UnavailableError extends DagentError {
  readonly retryAfterSec: number;
  constructor(retryAfterSec = UNAVAILABLE_RETRY_AFTER_SEC, message?: string) {
    super('UNAVAILABLE', message ?? `the database is unavailable; retry in ${retryAfterSec}s (a report made again is applied once)`, { retryAfterSec });
    this.retryAfterSec = retryAfterSec;
  }
}

/** What a 503 asks the client to wait, in seconds: a database restart or failover usually takes a few. */
export const UNAVAILABLE_RETRY_AFTER_SEC = 2;

/** Anything that is not one of the above: a bug, logged where it happened. */
export class InternalError extends DagentError {
  constructor(message = 'internal error (logged on the server)') {
    super('INTERNAL', message);
  }
}

/** Exit codes of the `dagent` command. */
export const EXIT = {
  ok: 0,
  /** Anything not listed below: refusals of a valid request, database errors, bugs. */
  error: 1,
  /** Invalid input (a DAG file, an option, an unknown id); nothing was written. */
  invalidInput: 2,
  /** Backpressure: the queue is full; nothing was written. */
  backpressure: 3,
  /** No such DAG, task, dead letter, agent or schedule. */
  notFound: 4,
  /** The database cannot be reached; nothing was done. Worth retrying. */
  unavailable: 5,
} as const;

interface ErrorCodeDef {
  /** The class that carries the code (the classes take different arguments: the table records only which). */
  class: abstract new (...args: any[]) => DagentError;
  /** The HTTP API's status for it; null for a code no HTTP call returns. */
  status: number | null;
  /** The CLI's exit code for it; null for a code only the HTTP server raises. */
  exit: (typeof EXIT)[keyof typeof EXIT] | null;
  /** When it happens, for the OpenAPI document and the docs. */
  description: string;
}

/** Every error code: the one place its HTTP status, exit code and meaning are defined. */
export const ERROR_CODES = {
  BAD_REQUEST: { class: BadRequestError, status: 400, exit: null, description: 'a request the server could not read (malformed JSON)' },
  INVALID_INPUT: { class: InvalidInputError, status: 400, exit: EXIT.invalidInput, description: 'a field that does not match its schema or its rules; the message names it' },
  DAG_INVALID: { class: DagValidationError, status: 400, exit: EXIT.invalidInput, description: 'an invalid DAG file; `problems` lists each with file, line, column and field' },
  CYCLE: { class: CycleError, status: 400, exit: EXIT.invalidInput, description: 'edges that would close a dependency cycle; `cycle` is the path' },
  UNAUTHORIZED: { class: UnauthorizedError, status: 401, exit: null, description: 'no token, or an unknown or revoked one' },
  FORBIDDEN: { class: ForbiddenError, status: 403, exit: EXIT.error, description: 'the token\'s role or agent may not do this' },
  NOT_FOUND: { class: NotFoundError, status: 404, exit: EXIT.notFound, description: 'no such DAG, task, dead letter, agent, schedule or route' },
  LEASE_LOST: { class: LeaseLostError, status: 409, exit: EXIT.error, description: 'a stale fencing token: the task was taken back or claimed again' },
  ILLEGAL_TRANSITION: { class: IllegalTransitionError, status: 409, exit: EXIT.error, description: 'the task or DAG is in a state that does not allow this' },
  TRANSITION_RACED: { class: TransitionRacedError, status: 409, exit: EXIT.error, description: 'the task changed while the request was refused; look again' },
  CONFLICT: { class: ConflictError, status: 409, exit: EXIT.error, description: 'an idempotency key or name already taken' },
  DLQ_RESOLVED: { class: DeadLetterResolvedError, status: 409, exit: EXIT.error, description: 'a dead letter already retried or cancelled' },
  BUDGET_EXCEEDED: { class: BudgetExceededError, status: 409, exit: EXIT.error, description: 'the DAG\'s budget is spent, or a spend limit stopped the attempt that reports' },
  DAG_NOT_COMPLETED: { class: DagNotCompletedError, status: null, exit: EXIT.error, description: '`dagent watch`, `submit --wait` and the main job: the DAG ended cancelled or blocked' },
  TASK_FAILED: { class: TaskError, status: null, exit: EXIT.error, description: 'thrown by an agent\'s handler to fail its task with an error class; it becomes the attempt\'s failure, never an answer' },
  BODY_TOO_LARGE: { class: BodyTooLargeError, status: 413, exit: null, description: 'a request body over the limit' },
  UNSUPPORTED_MEDIA_TYPE: { class: UnsupportedMediaTypeError, status: 415, exit: null, description: 'a body that is neither JSON nor YAML' },
  URI_TOO_LONG: { class: UriTooLongError, status: 414, exit: null, description: 'a path parameter longer than the router reads' },
  HEADERS_TOO_LARGE: { class: HeadersTooLargeError, status: 431, exit: null, description: 'request headers over the server\'s limit' },
  REQUEST_TIMEOUT: { class: RequestTimeoutError, status: 408, exit: null, description: 'the request did not arrive in time' },
  BACKPRESSURE: { class: BackpressureError, status: 429, exit: EXIT.backpressure, description: 'the queue is full; nothing was written; `Retry-After` says when to try again' },
  UNAVAILABLE: { class: UnavailableError, status: 503, exit: EXIT.unavailable, description: 'the database is unavailable for now; `Retry-After` says when to try again, and a report made again is applied once' },
  INTERNAL: { class: InternalError, status: 500, exit: EXIT.error, description: 'a bug, logged on the server' },
} as const satisfies Record<string, ErrorCodeDef>;

export type ErrorCode = keyof typeof ERROR_CODES;

/**
 * What naming a tenant that does not exist answers (a submit, a signal, a schedule): a 400 naming it. A token scoped
 * to other tenants gets the same answer for one that does exist, so it learns nothing of tenants beyond its own.
 */
export function tenantUnknownError(id: string): InvalidInputError {
  return new InvalidInputError(`tenant ${JSON.stringify(id)} does not exist (an admin makes it: dagent tenants create ${id})`, { field: 'tenant' });
}
