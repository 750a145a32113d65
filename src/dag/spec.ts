import type { Instant } from '../durations.js';
import type { ApprovalStep } from '../validation/steps/approval.js';

/**
 * A validated, normalized DAG: what the engine inserts. Produced from YAML by
 * load.ts, or built directly by programs (and agents spawning work).
 */
export interface DagSpec {
  name: string;
  title?: string;
  description?: string;
  /** Param values: a list param's is a list. */
  params: Record<string, string | number | boolean | Array<string | number | boolean>>;
  budgetUsd?: number;
  /** Most the DAG may spend in one UTC day. */
  dailyBudgetUsd?: number;
  /** The share of a limit past which a usage report's answer says low. Default USAGE_DEFAULTS.lowAt. */
  budgetLowAt?: number;
  idempotencyKey?: string;
  sourceFile?: string;
  tasks: TaskSpec[];
  /** Present when the file declares a schedule: submitting registers it instead of running the DAG now. */
  schedule?: ScheduleSpec;
  /** What the DAG's agents may spawn into it. Default: data-only subtasks of their own making. */
  spawn?: SpawnPolicy;
}

/**
 * Who wrote a task's spec, which decides what an agent executing it may trust:
 * `dag` (a DAG file or program: its author), `template` (an agent filled in the data
 * fields of a template its DAG's author wrote), `agent` (an agent wrote all of it:
 * data, never something to run), `validation` (the engine, from the judged task's steps).
 */
export type TaskOrigin = 'dag' | 'template' | 'agent' | 'validation';
export const TASK_ORIGINS = ['dag', 'template', 'agent', 'validation'] as const satisfies readonly TaskOrigin[];

export interface SpawnPolicy {
  /** Subtasks agents may spawn by name, with what runs fixed by the DAG's author. */
  templates: Record<string, SpawnTemplate>;
  /** Whether agents may spawn subtasks of their own making (data only). */
  freeForm: boolean;
  /** Most subtasks agents may add to the DAG in all; undefined: the DAG task limit. */
  maxTasks?: number;
}

/**
 * A template as stored with its DAG: a task's fields but those the spawning agent gives
 * (key, dependencies, context, times, idempotency), plus the input fields it may fill in.
 * Its `body` holds a default prompt the agent may replace, the models, and `input`: the fixed fields.
 */
export interface SpawnTemplate extends Omit<TaskSpec, 'key' | 'dependsOn' | 'deadline' | 'notBefore' | 'idempotencyKey' | 'origin' | 'priority' | 'boostPerMinute'> {
  /** Undefined: the spawning agent's choice, else its parent's priority. */
  priority?: number;
  boostPerMinute?: number;
  /** Input fields the agent may fill in. */
  accepts: string[];
}

export interface ScheduleSpec {
  name: string;
  cron: string;
  timezone: string;
  catchup: 'none' | 'latest' | 'all';
  catchupLimit: number;
  overlap: 'allow' | 'skip' | 'cancel_previous';
  enabled: boolean;
  params: Record<string, string | number | boolean>;
}

export interface TaskSpec {
  key: string;
  type: string;
  title?: string;
  body: TaskBody;
  requiredCapabilities: string[];
  maxCostUsd?: number;
  /** Most tokens (in + out) one attempt may report. */
  maxTokens?: number;
  /** Tokens an attempt is expected to use, reserved against its model's declared tokens limit. Default: the limit's. */
  estimatedTokens?: number;
  maxDurationSec?: number;
  /** Heartbeat interval while running; the lease lasts three beats. Default LEASE_DEFAULTS.heartbeatSec. */
  heartbeatSec?: number;
  priority: number;
  boostPerMinute: number;
  /** Declared expected run time; without it the engine uses what it learned for the type, else a default. */
  estimateSec?: number;
  deadline?: Instant;
  notBefore?: Instant;
  dependsOn: string[];
  idempotencyKey?: string;
  maxAttempts: number;
  retry: RetryPolicy;
  output?: Record<string, unknown>;
  tags: string[];
  /** Who wrote the spec. Default `dag`. */
  origin?: TaskOrigin;
  /** At most `limit` tasks with this key claimed or running at once, across DAGs. */
  concurrency?: ConcurrencySpec;
  /** No agent runs it: it waits for a signal to this key, whose payload becomes its output. */
  waitFor?: WaitForSpec;
  /** No agent runs it: it waits for a person to approve or reject it (the step as stored is also its spec.input.step). */
  approval?: ApprovalStep;
  /**
   * Run once per item: when its upstream tasks are done, the waits loop adds a child per item (`<key>/0`, …: this
   * task's spec with spec.input.item and .index), and the task completes with their outputs, in order.
   */
  forEach?: ForEachSpec;
}

/** The list a for_each maps over: a context ref to an upstream output (`plan.files`), or the items themselves. */
export type ForEachSpec = { over: string } | { items: unknown[] };

export interface WaitForSpec {
  signal: string;
  /** How long each attempt waits; undefined: no limit. */
  timeoutSec?: number;
}

export interface ConcurrencySpec { key: string; limit: number }

/** What an agent receives as the task's spec. */
export interface TaskBody {
  prompt?: string;
  context: string[];
  models: string[];
  fallbackModels: string[];
  input: Record<string, unknown>;
  /** A for_each task's list (no agent receives that task; its children's bodies leave this out). */
  forEach?: ForEachSpec;
  /** A git worktree for each attempt, made by the agent runtime before the handler runs (docs/coding-agents.md). */
  workspace?: WorkspaceSpec;
  /** A merge queue: the listed tasks' branches landed on `into` by an agent with the merge capability (docs/coding-agents.md). */
  merge?: MergeSpec;
}

/**
 * A merge queue as stored: the DAG's author wrote every field (an agent never can); `repo` is the repository's real
 * path and `tasks` the keys whose branches land, in order.
 */
export interface MergeSpec {
  repo: string;
  into: string;
  /** In landing order; a for_each task's branches are its children's (`<key>/0`, …), in item order. */
  tasks: Array<{ key: string; forEach: boolean }>;
  test?: { command: string; timeoutSec: number; env: Record<string, string> };
  /** A spawn template of the DAG: a branch that conflicts spawns a subtask from it with input `conflict`. */
  resolver?: string;
}

/** The capability a merge task requires: the agents that land branches (agents/merge.ts) declare it. */
export const MERGE_CAPABILITY = 'merge';
/** The input field a resolver subtask receives the conflict in (its template must accept it). */
export const MERGE_CONFLICT_FIELD = 'conflict';

/**
 * A task's workspace as stored: `repo` is the repository's real path, checked at submission to be inside the DAG's
 * directory or DAGENT_FILE_ROOTS; the DAG's author wrote it, never an agent.
 */
export interface WorkspaceSpec {
  repo: string;
  /** The ref the worktree starts from; undefined: the repository's HEAD. */
  base?: string;
  keep: WorkspaceKeep;
}

/** What happens to a failed attempt's worktree: removed (`never`, the default) or kept for debugging (`on_failure`). */
export type WorkspaceKeep = 'never' | 'on_failure';
export const WORKSPACE_KEEP_DEFAULT: WorkspaceKeep = 'never';

export interface RetryPolicy {
  strategy: 'exponential' | 'fixed' | 'immediate';
  initialDelaySec: number;
  multiplier: number;
  maxDelaySec: number;
  jitter: number;
  retryOn?: string[];
  noRetryOn: string[];
}

/** Defaults for a schedule block's optional fields. */
export const SCHEDULE_DEFAULTS = { timezone: 'UTC', catchup: 'latest', catchupLimit: 10, overlap: 'allow', enabled: true } as const;

/** Defaults for every task field a DAG file may leave out. */
export const TASK_DEFAULTS = {
  priority: 50,
  /** Anti-starvation: a READY task gains 0.1 priority points a minute (a background 90 reaches 59 in about 5 hours). */
  boostPerMinute: 0.1,
  maxAttempts: 3,
  /** A task that waits for a signal: its timeout dead-letters it, for a person to decide (the DAG's defaults do not apply). */
  waitMaxAttempts: 1,
  retry: {
    strategy: 'exponential',
    initialDelaySec: 10,
    multiplier: 2,
    maxDelaySec: 600,
    jitter: 0.1,
    noRetryOn: [],
  } satisfies RetryPolicy,
} as const;
