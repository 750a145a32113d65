// The rows dagent's functions return, as plain types. They are drizzle's inferred row types spelt
// out, so the published declarations never load drizzle's (schema/rows-match.ts fails to compile
// when a column changes and these do not), with the other shapes the engine's functions take and give.
import type { TaskState } from '../model/state-machine.js';
import type { RetryPolicy, TaskOrigin } from '../dag/spec.js';

/** A row of `tasks`. */
export interface TaskRow {
  id: string;
  title: string | null;
  status: string;
  spec: unknown;
  reservedUsd: number;
  idempotencyKey: string | null;
  createdAt: Date;
  updatedAt: Date;
  completedAt: Date | null;
  dagId: string;
  key: string;
  parentId: string | null;
  hasChildren: boolean;
  /** Spared after a shared crash: its next attempts run alone (schema/tasks.ts). */
  runAlone: boolean;
  lateDependents: boolean;
  validatesId: string | null;
  validatesFence: number | null;
  validationStep: number | null;
  validatesAgent: string | null;
  origin: string;
  type: string;
  contextKeys: string[];
  requiredCapabilities: string[];
  models: string[];
  concKey: string | null;
  concLimit: number | null;
  waitKey: string | null;
  waitTimeoutSec: number | null;
  capKey: string;
  estimateSec: number;
  cpRankSec: number;
  deadlineMissed: boolean;
  maxCostUsd: number | null;
  maxTokens: number | null;
  usageFence: number | null;
  attemptCostUsd: number;
  attemptTokensIn: number;
  attemptTokensOut: number;
  estimatedTokens: number | null;
  maxDurationSec: number | null;
  heartbeatSec: number | null;
  priority: number;
  boostPerMinute: number;
  effectivePriority: number;
  deadline: Date | null;
  runAt: Date | null;
  depsRemaining: number;
  attempts: number;
  maxAttempts: number;
  attemptsResetFence: number;
  claimLapses: number;
  retryPolicy: RetryPolicy;
  outputSpec: unknown;
  output: unknown;
  tags: string[];
  claimedBy: string | null;
  fence: number;
  claimedAt: Date | null;
  startedAt: Date | null;
  leaseExpiresAt: Date | null;
  heartbeatAt: Date | null;
  progress: number | null;
  progressMessage: string | null;
  costUsd: number;
  tokensIn: number;
  tokensOut: number;
  lastError: string | null;
  readyAt: Date | null;
  /** A task a rerun carried over completed: the task whose output it holds (schema/tasks.ts). */
  reusedFrom: string | null;
  /** Its DAG's tenant. */
  tenantId: string;
}

/** A row of `agents`. */
export interface AgentRow {
  id: string;
  status: string;
  budgetUsd: number | null;
  spentUsd: number;
  reservedUsd: number;
  dailyBudgetUsd: number | null;
  daySpentUsd: number;
  spendDay: string | null;
  type: string;
  heartbeatAt: Date;
  capabilities: string[];
  models: string[];
  /** The tenants whose work it takes; null: every tenant's. */
  tenants: string[] | null;
  maxConcurrent: number;
  claimWriter: string | null;
  metadata: unknown;
  registeredAt: Date;
}

/** A row of `dead_letters`. */
export interface DeadLetterRow {
  id: string;
  createdAt: Date;
  dagId: string;
  attempts: number;
  taskId: string;
  reason: string;
  errorClass: string | null;
  poisonPill: boolean;
  history: unknown;
  totalCostUsd: number;
  resolution: string | null;
  resolvedAt: Date | null;
  resolvedBy: string | null;
  resolvedNote: string | null;
}

/** A row of `dags`. */
export interface DagRow {
  id: string;
  name: string;
  title: string | null;
  status: string;
  blockedReason: string | null;
  params: unknown;
  spec: unknown;
  sourceFile: string | null;
  budgetUsd: number | null;
  spentUsd: number;
  reservedUsd: number;
  dailyBudgetUsd: number | null;
  daySpentUsd: number;
  spendDay: string | null;
  budgetLowAt: number | null;
  tasksTotal: number;
  tasksOpen: number;
  idempotencyKey: string | null;
  createdBy: string;
  spawnPolicy: unknown;
  scheduledAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  completedAt: Date | null;
  /** When retention began pruning it (it is being deleted); null otherwise. */
  prunedAt: Date | null;
  /** Every tag its tasks carried at submit. */
  tags: string[];
  /** A rerun with a change: the DAG it re-ran, and what it changed (schema/dags.ts). */
  rerunOf: string | null;
  rerunChange: unknown;
  /** The tenant it belongs to. */
  tenantId: string;
}

/** A row of `attempts`: one attempt of a task. */
export interface AttemptRow {
  dagId: string;
  fence: number;
  startedAt: Date;
  costUsd: number;
  tokensIn: number;
  tokensOut: number;
  taskId: string;
  errorClass: string | null;
  attempt: number;
  agentId: string | null;
  outcome: string;
  errorMessage: string | null;
  endedAt: Date;
  durationMs: number;
  model: string | null;
  replayedCostUsdUnused: number;
  details: unknown;
}

/** A recorded durable step (db/schema/task-steps.ts): its result and what it cost, under the fence that recorded it. */
export interface TaskStepRow {
  taskId: string;
  dagId: string;
  name: string;
  scope: string;
  attempt: number;
  fence: number;
  result: unknown;
  sizeBytes: number;
  durationMs: number | null;
  costUsd: number;
  tokensIn: number;
  tokensOut: number;
  model: string | null;
  startedAt: Date | null;
  recordedAt: Date;
}

/** What an attempt reported spending: recorded on its attempts row and charged to its DAG and agent, however it ended (db/queries/spend.ts). */
export interface AttemptSpend {
  costUsd?: number;
  tokensIn?: number;
  tokensOut?: number;
  /** The model it ran on, for the cost report. */
  model?: string | null;
}

export interface CompletionResult {
  /** Ids that were completed; the others were refused (stale token or wrong state). */
  completed: string[];
  /** How many dependents became READY. */
  unblocked: number;
  /** DAGs whose last open task this batch completed. */
  dagsCompleted: string[];
  /** How many completed, by task type. */
  completedByType: Record<string, number>;
}

/**
 * A report a guarded statement did not apply, as the task's row and the attempt under the reported fence stood in
 * the statement's snapshot: enough to say why without reading again (engine/attempt/refusal.ts).
 */
export interface RefusedRow {
  /** Null: there is no such task. */
  status: string | null;
  fence: number | null;
  /** It declares output validation or is a validation task: its output is settled, not completed by the statement. */
  validated: boolean;
  /** The attempt under the reported fence, if it ended: its outcome and error. */
  outcome: string | null;
  errorClass: string | null;
  errorMessage: string | null;
  /** That attempt failed without its holder's report: the reaper took its lapsed lease back, or its run overran. */
  reaped: boolean;
  /** The task's output (or, for a validation task, what its agent sent) equals the reported one, as jsonb. */
  sameOutput: boolean;
  runAt: Date | null;
  /** The task's newest dead letter, when it is dead-lettered. */
  deadLetter: { id: string; reason: string; poisonPill: boolean } | null;
}

export interface FailureInput extends AttemptSpend {
  id: string;
  fence: number;
  errorClass: string;
  message: string;
  details?: Record<string, unknown>;
  /**
   * Reaper only: re-check inside the UPDATE that the lease is still expired (or the
   * run still over its max duration), so a heartbeat or completion that just landed wins.
   */
  reapCondition?: 'lease_expired' | 'over_max_duration';
}

export interface StatusCount { status: string; tier: string; n: number }

export interface CancelledRow { id: string; dagId: string; key: string; previous: TaskState; fence: number }

/** Which open entries a bulk action selects: every given field must match; `agentId` matches any attempt in the history. */
export interface DeadLetterSelector {
  /** Only these tenants' entries (a token scoped to them); undefined or null: every tenant's. */
  tenants?: readonly string[] | null;
  dagId?: string; type?: string; errorClass?: string; agentId?: string;
  /** The entry's id, or part of its task's key or of its reason (any case). */
  q?: string;
  /** Dead-lettered at or after / before these instants (ISO 8601). */
  from?: string; to?: string;
}
export interface AgentRegistration {
  id: string;
  type: string;
  capabilities: string[];
  models?: string[];
  /** The tenants whose work it takes; absent or null: every tenant's. */
  tenants?: string[] | null;
  maxConcurrent?: number;
  budgetUsd?: number | null;
  /** Most it may spend in one UTC day (null: no cap). */
  dailyBudgetUsd?: number | null;
  metadata?: Record<string, unknown>;
}

export interface CompletionInput extends AttemptSpend {
  id: string;
  fence: number;
  output: unknown;
  /** Recorded on the attempt (checked completions: the validation verdicts). */
  details?: Record<string, unknown>;
}

export interface CompletionMode {
  /**
   * False (the default): refuse tasks that declare output validation or are
   * validation tasks, so no caller can complete those without their check.
   * True: the validation engine, which has checked them; also completes VALIDATING
   * tasks, whose attempt row already exists and is finished here.
   */
  checked?: boolean;
  /**
   * Hand the dependents these completions unblock to this agent where a claim of it would take them first
   * (tasks-hand-off.ts); the statement returns them as claimed. Only for completions of one agent's own tasks.
   */
  handTo?: HandOff;
}

/** The completing agent, and how many of the dependents its completion unblocks it would take. */
export interface HandOff {
  agentId: string;
  /** The capabilities it claims with (a subset of its registered ones, as for a claim). */
  capabilities: readonly string[];
  /** Most tasks to hand it: the slots its completions free, as the claimer counts them. */
  max: number;
  /** Hand them RUNNING under the heartbeat lease (a claimer that starts what it claims), else CLAIMED under `claimTtlSec`. */
  start: boolean;
  claimTtlSec: number;
}

/**
 * A failed attempt as the next one sees it, so an agent can correct itself: what went wrong,
 * what it returned when validation rejected it, and each validator's verdict with its reasons.
 */
export interface PreviousAttempt {
  attempt: number;
  agentId: string | null;
  model: string | null;
  errorClass: string | null;
  errorMessage: string | null;
  /** The output validation rejected (absent for a failure the agent reported). */
  rejectedOutput?: unknown;
  /** Each validation step's verdict on that output: step, kind, pass, score, reasons. */
  verdicts?: unknown[];
  endedAt: Date;
}

/** Where a keyset-paged list goes on from (db/queries/keyset.ts): the last row shown, its exact created_at as PostgreSQL prints it, and id. */
export interface Cursor { at: string; id: string }

/** What the DAG list shows: any of these, all of them must match. */
export interface DagListFilter {
  status?: string;
  /** Only these tenants' DAGs (a token scoped to them); undefined or null: every tenant's. */
  tenants?: readonly string[] | null;
  /** Only this tenant's (a filter, within `tenants`). */
  tenant?: string;
  /** The id, or a part of the name or title (any case). */
  q?: string;
  /** A tag one of its tasks carries. */
  tag?: string;
  /** Created at or after / before these instants (ISO 8601). */
  from?: string;
  to?: string;
  limit?: number;
  /** The page after this row (db/queries/keyset.ts). */
  cursor?: Cursor;
}

/** A task as the claim statement returns it (tasks-claim.ts), before engine/attempt/claim.ts shapes it for the agent. */
export interface ClaimedRow {
  id: string;
  dagId: string;
  key: string;
  type: string;
  title: string | null;
  spec: Record<string, unknown>;
  fence: number;
  attempt: number;
  maxAttempts: number;
  maxDurationSec: number | null;
  heartbeatSec: number | null;
  maxCostUsd: number | null;
  outputSpec: Record<string, unknown> | null;
  origin: TaskOrigin;
  leaseExpiresAt: Date;
  /** Seconds it waited READY before this claim. */
  waitSec: number;
  /** Outputs of the upstream tasks named in the task's context refs, by task key. */
  upstreamOutputs: Record<string, unknown>;
  /** Outputs of completed subtasks this task spawned, by their key under the parent. */
  childOutputs: Record<string, unknown>;
  /** The claiming agent's registered models (`*`: any), to choose the one the task runs on. */
  agentModels: string[];
  /** Models or providers paused for the fleet now (a provider's rate limit, a declared limit spent): never the one chosen. */
  pausedModels: string[];
  /** The model a declared rate limit reserved this attempt under (the full statement), if any: the one to hand out. */
  rateModel?: string | null;
}

/** A tenant as `dagent tenants list` shows it: its weight, what it was served, and its work now. */
export interface TenantView {
  id: string;
  name: string | null;
  weight: number;
  vtime: number;
  servedTokens: number;
  servedTasks: number;
  maxRunning: number | null;
  maxQueued: number | null;
  maxUsdPerDay: number | null;
  maxTokensPerMinute: number | null;
  /** Past its money or tokens quota: claims pass its work over until then, for this reason (the share loop decides). */
  quotaUntil: Date | null;
  quotaReason: string | null;
  ready: number;
  held: number;
  dags: number;
  createdAt: Date;
}
