import { sql } from 'drizzle-orm';
import {
  bigint, boolean, check, doublePrecision, index, integer, jsonb, numeric, pgTable, real, smallint, text, timestamp, uniqueIndex,
} from 'drizzle-orm/pg-core';
import { dags } from './dags.js';
import { retryPolicyColumn } from './column-types.js';
import { EXPIRING_LEASE_STATES, HELD_STATES, TASK_STATES } from '../../model/state-machine.js';
import { TASK_ORIGINS } from '../../dag/spec.js';

/**
 * One task of a DAG. `status` moves only through src/model/state-machine.ts.
 * `fence` is the fencing token: it grows on every claim, and every agent-side
 * transition must present the value it got from its claim.
 */
export const tasks = pgTable(
  'tasks',
  {
    id: text('id').primaryKey(),
    dagId: text('dag_id').notNull().references(() => dags.id, { onDelete: 'cascade' }),
    key: text('key').notNull(),
    parentId: text('parent_id'),
    /** Set once the task spawns a subtask, so the claim looks up child outputs only for such tasks. */
    hasChildren: boolean('has_children').notNull().default(false),
    /**
     * Its agent died running it beside other tasks and it was spared (crash_shared): its next attempts run alone, on
     * an agent that holds nothing else and claims nothing beside it, so a crash then names its cause (crash-blame.ts).
     */
    runAlone: boolean('run_alone').notNull().default(false),
    /**
     * Set, under the row's lock, when an edge from this unfinished task is added at runtime (a spawn,
     * dagEdgesAdd). A completion whose snapshot predates that edge still sees the flag on the row it
     * updates, and recounts this task's dependents after it commits (taskLateDependentsRecount).
     */
    lateDependents: boolean('late_dependents').notNull().default(false),
    /** Validation tasks only: the task whose output this one judges, and the fence of the attempt that produced it. */
    validatesId: text('validates_id'),
    validatesFence: integer('validates_fence'),
    /** While VALIDATING: the index of the output.validation step its validation task is running. */
    validationStep: integer('validation_step'),
    /** Validation tasks only: the agent whose output it judges, who may never claim it. */
    validatesAgent: text('validates_agent'),
    /** Who wrote the spec (dag/spec.ts TaskOrigin): an agent that executes what a task says trusts only dag, template and validation. */
    origin: text('origin').notNull().default('dag'),
    type: text('type').notNull(),
    title: text('title'),
    status: text('status').notNull(),
    spec: jsonb('spec').notNull(),
    contextKeys: text('context_keys').array().notNull().default(sql`'{}'::text[]`),
    requiredCapabilities: text('required_capabilities').array().notNull().default(sql`'{}'::text[]`),
    /** The models the task accepts (its models and fallback models, sorted; empty: any agent): only an agent with one of them claims it. */
    models: text('models').array().notNull().default(sql`'{}'::text[]`),
    /** Its concurrency key (concurrency_keys) and the limit it declared: at most that many tasks with the key are claimed or running at once. */
    concKey: text('conc_key'),
    concLimit: integer('conc_limit'),
    /**
     * A task no agent runs: it waits for the signal with this key (wait_for), and its payload becomes its output.
     * The trigger tasks_await (migration 0022) makes it WAITING where it would become READY.
     */
    waitKey: text('wait_key'),
    /** How long it waits for its signal, each attempt (its lease while WAITING); null: no limit. */
    waitTimeoutSec: integer('wait_timeout_sec'),
    /** The task's claim group: its required capabilities and accepted models as one key (capability-groups.ts claimGroupKey); the claim walks one index range per group. */
    capKey: text('cap_key').notNull().default(''),
    /** What the current claim reserved against the agent's and the DAG's budgets (its max_cost_usd); released when the attempt ends. */
    reservedUsd: numeric('reserved_usd', { mode: 'number' }).notNull().default(0),
    /** Expected run time: declared (estimate:), else the median of completed attempts of this type, else a default. */
    estimateSec: doublePrecision('estimate_sec').notNull().default(60),
    /** Upward rank: the longest path of estimates from this task to a sink of its DAG (itself included). */
    cpRankSec: doublePrecision('cp_rank_sec').notNull().default(0),
    /** Set by the priority refresher once the deadline can no longer be met (now + estimate > deadline). */
    deadlineMissed: boolean('deadline_missed').notNull().default(false),
    maxCostUsd: numeric('max_cost_usd', { mode: 'number' }),
    /** Most tokens (in + out) one attempt may report; past it the attempt is stopped (budget_exceeded). */
    maxTokens: bigint('max_tokens', { mode: 'number' }),
    /**
     * Usage the attempt of `usage_fence` reported while it ran (usage_reports), already charged to the task, its DAG and
     * its agent: the statement that ends the attempt records it on the attempts row. Worth anything only while
     * usage_fence = fence (a claim moves the fence on, so nothing needs resetting).
     */
    usageFence: integer('usage_fence'),
    attemptCostUsd: numeric('attempt_cost_usd', { mode: 'number' }).notNull().default(0),
    attemptTokensIn: bigint('attempt_tokens_in', { mode: 'number' }).notNull().default(0),
    attemptTokensOut: bigint('attempt_tokens_out', { mode: 'number' }).notNull().default(0),
    /** Tokens an attempt is expected to use: reserved against its model's declared tokens limit at claim (rate_limits). Null: the limit's default. */
    estimatedTokens: integer('estimated_tokens'),
    maxDurationSec: integer('max_duration_sec'),
    /** How often the agent heartbeats a running task; the lease lasts three beats. Null: LEASE_DEFAULTS. */
    heartbeatSec: integer('heartbeat_sec'),
    priority: smallint('priority').notNull().default(50),
    boostPerMinute: real('boost_per_minute').notNull().default(0),
    /** What the claim orders by; equals `priority` until the priority refresher owns it. */
    effectivePriority: doublePrecision('effective_priority').notNull().default(50),
    deadline: timestamp('deadline', { withTimezone: true }),
    /** Earliest time the task may become READY: its not_before, or its retry time after a failure. */
    runAt: timestamp('run_at', { withTimezone: true }),
    depsRemaining: integer('deps_remaining').notNull().default(0),
    attempts: integer('attempts').notNull().default(0),
    maxAttempts: integer('max_attempts').notNull().default(3),
    /** Fence at the last `dlq retry --reset-attempts`: failures before it no longer count toward retries or poison pills. */
    attemptsResetFence: integer('attempts_reset_fence').notNull().default(0),
    /** Leases that lapsed before the agent showed any sign of life (a lost claim reply): not attempts, up to LEASE_DEFAULTS.claimLapsesMax. */
    claimLapses: integer('claim_lapses').notNull().default(0),
    /** Stored as its difference from the defaults (column-types.ts retryPolicyStored); read back whole. */
    retryPolicy: retryPolicyColumn('retry_policy').notNull(),
    idempotencyKey: text('idempotency_key'),
    outputSpec: jsonb('output_spec'),
    output: jsonb('output'),
    tags: text('tags').array().notNull().default(sql`'{}'::text[]`),
    claimedBy: text('claimed_by'),
    fence: integer('fence').notNull().default(0),
    claimedAt: timestamp('claimed_at', { withTimezone: true }),
    startedAt: timestamp('started_at', { withTimezone: true }),
    leaseExpiresAt: timestamp('lease_expires_at', { withTimezone: true }),
    heartbeatAt: timestamp('heartbeat_at', { withTimezone: true }),
    progress: real('progress'),
    progressMessage: text('progress_message'),
    costUsd: numeric('cost_usd', { mode: 'number' }).notNull().default(0),
    tokensIn: bigint('tokens_in', { mode: 'number' }).notNull().default(0),
    tokensOut: bigint('tokens_out', { mode: 'number' }).notNull().default(0),
    lastError: text('last_error'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    readyAt: timestamp('ready_at', { withTimezone: true }),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    completedAt: timestamp('completed_at', { withTimezone: true }),
    /**
     * In a DAG made by `dag rerun --model/--set`: the task of the DAG it re-runs whose output this one carried over. Such a task is
     * inserted completed (taskInsertMany), with that output and no attempt: it cost nothing. Null for a task that ran.
     */
    reusedFrom: text('reused_from'),
    /** Its DAG's tenant, on the task for the claim: each tenant's READY tasks of a claim group are a range of tasks_ready_group_idx. */
    tenantId: text('tenant_id').notNull().default('default'),
  },
  (t) => [
    check('tasks_status_ck', sql.raw(`status in (${TASK_STATES.map((s) => `'${s}'`).join(', ')})`)),
    check('tasks_priority_ck', sql`${t.priority} between 0 and 100`),
    check('tasks_origin_ck', sql.raw(`origin in (${TASK_ORIGINS.map((o) => `'${o}'`).join(', ')})`)),
    uniqueIndex('tasks_dag_key_uq').on(t.dagId, t.key),
    // Per tenant: one tenant's key never collides with another's task.
    uniqueIndex('tasks_tenant_idempotency_key_uq').on(t.tenantId, t.idempotencyKey).where(sql`${t.idempotencyKey} is not null`),
    // The claim walks this index, one range per capability group and tenant the agent covers, in priority order,
    // and stops after N matches per range: it never sorts and never walks tasks it cannot take.
    index('tasks_ready_group_idx').on(t.capKey, t.tenantId, t.effectivePriority, t.readyAt, t.id).where(sql`${t.status} = 'ready'`),
    index('tasks_lease_idx').on(t.leaseExpiresAt).where(sql`${t.status} in (${sql.raw(EXPIRING_LEASE_STATES.map((s) => `'${s}'`).join(', '))})`),
    index('tasks_run_at_idx').on(t.runAt).where(sql`${t.status} in ('retrying', 'pending')`),
    // No plain index on status: it lured the planner away from the claim index (a bitmap scan plus
    // sort over every READY row, 27 ms per claim at 14k READY) and costs every status change. (dag_id, key) serves DAG lookups.
    index('tasks_parent_idx').on(t.parentId).where(sql`${t.parentId} is not null`),
    index('tasks_deadline_watch_idx').on(t.deadline).where(sql`${t.deadline} is not null and not ${t.deadlineMissed}`),
    index('tasks_validates_idx').on(t.validatesId).where(sql`${t.validatesId} is not null`),
    // Whether any keyed task is READY (the claim then takes the concurrency keys' steps); empty without keys.
    index('tasks_ready_keyed_idx').on(t.concKey).where(sql`${t.status} = 'ready' and ${t.concKey} is not null`),
    // The tasks a signal completes, and what the waits loop walks for signals that came early and timeouts.
    index('tasks_waiting_idx').on(t.waitKey).where(sql`${t.status} = 'waiting'`),
    // What an agent holds (claimed, running, or its output under validation): the claim counts these against max_concurrent.
    index('tasks_held_idx').on(t.claimedBy).where(sql`${t.status} in (${sql.raw(HELD_STATES.map((s) => `'${s}'`).join(', '))})`),
    // A tenant's tasks held by agents: what its running quota counts (tenants.max_running), at most that many entries.
    index('tasks_held_tenant_idx').on(t.tenantId).where(sql`${t.status} in (${sql.raw(HELD_STATES.map((s) => `'${s}'`).join(', '))})`),
  ],
);
