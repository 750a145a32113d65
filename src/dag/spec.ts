import type { Instant } from '../durations.js';

/**
 * A validated, normalized DAG: what the engine inserts. Produced from YAML by
 * load.ts, or built directly by programs (and agents spawning work).
 */
export interface DagSpec {
  name: string;
  title?: string;
  description?: string;
  params: Record<string, string | number | boolean>;
  budgetUsd?: number;
  idempotencyKey?: string;
  sourceFile?: string;
  tasks: TaskSpec[];
  /** Present when the file declares a schedule: submitting registers it instead of running the DAG now. */
  schedule?: ScheduleSpec;
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
}

/** What an agent receives as the task's spec. */
export interface TaskBody {
  prompt?: string;
  context: string[];
  models: string[];
  fallbackModels: string[];
  input: Record<string, unknown>;
}

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
  retry: {
    strategy: 'exponential',
    initialDelaySec: 10,
    multiplier: 2,
    maxDelaySec: 600,
    jitter: 0.1,
    noRetryOn: [],
  } satisfies RetryPolicy,
} as const;
