import type { DagFile, MergeFile, RetryFile, ScheduleFile, SpawnFile, TaskFile, WorkspaceFile } from './file-schema.js';
import { TEST_STEP_DEFAULTS } from '../validation/steps/test.js';
import { mergeRepoOf, mergeTasksOf } from './merge-check.js';
import { durationSeconds, instantParse, type Instant } from '../durations.js';
import { countValue } from '../counts.js';
import { approvalResolve } from '../validation/steps/approval.js';
import {
  MERGE_CAPABILITY, SCHEDULE_DEFAULTS, TASK_DEFAULTS, WORKSPACE_KEEP_DEFAULT, type ConcurrencySpec, type MergeSpec, type TaskBody, type DagSpec, type RetryPolicy, type ScheduleSpec, type SpawnPolicy, type SpawnTemplate, type TaskSpec,
} from './spec.js';
import type { ParamValue } from './params.js';
import type { ValidationStep } from '../validation/steps/index.js';

/** A checked DagFile (after params substitution) as the engine's DagSpec, defaults applied. */
export function dagFileNormalize(
  file: DagFile, params: Record<string, ParamValue>, sourceFile?: string, validation: Record<string, ValidationStep[]> = {},
  templateValidation: Record<string, ValidationStep[]> = {},
): DagSpec {
  const d = file.defaults ?? {};
  const tasks: TaskSpec[] = Object.entries(file.tasks).map(([key, t]) => {
    // A task that waits for a signal or a person runs no agent: the defaults that say what an agent needs do not apply to it.
    const approval = t.approval ? approvalResolve(t.approval) : undefined;
    const wait = t.wait_for ?? approval;
    // A merge task works in the repository, not in a worktree: the DAG's default workspace is not its.
    const body = bodyAndConstraints(t.spec, wait ? {} : d, t.spec?.context ?? [], t.merge ? undefined : t.workspace, !t.merge);
    // An approval task shows the person its prompt and its upstream tasks' outputs (its context: what is being approved).
    if (approval) body.body = { ...body.body, prompt: approval.prompt, context: t.depends_on ?? [], input: { step: approval } };
    if (t.merge) {
      const merge = mergeNormalize(t.merge, mergeTasksOf(file, key), file);
      // Its tasks' outputs are its context (a for_each task's lists its children), and only agents that land branches claim it.
      body.body = { ...body.body, context: [...new Set([...body.body.context, ...merge.tasks.map((m) => m.key)])], merge };
      body.requiredCapabilities = [...new Set([...body.requiredCapabilities, MERGE_CAPABILITY])].sort();
    }
    return {
      key,
      type: t.type,
      title: t.title,
      ...body,
      priority: t.priority ?? d.priority ?? TASK_DEFAULTS.priority,
      boostPerMinute: t.boost_per_minute ?? d.boost_per_minute ?? TASK_DEFAULTS.boostPerMinute,
      ...(t.estimate ?? d.estimate) !== undefined ? { estimateSec: durationSeconds((t.estimate ?? d.estimate)!) } : {},
      deadline: t.deadline === undefined ? undefined : (instantParse(t.deadline) as Instant),
      notBefore: t.not_before === undefined ? undefined : (instantParse(t.not_before) as Instant),
      dependsOn: t.depends_on ?? [],
      idempotencyKey: t.idempotency_key,
      maxAttempts: t.max_attempts ?? (wait ? TASK_DEFAULTS.waitMaxAttempts : d.max_attempts ?? TASK_DEFAULTS.maxAttempts),
      retry: retryNormalize({ ...d.retry, ...t.retry }),
      output: outputNormalize(t.output, validation[key] ?? []),
      tags: [...new Set([...(d.tags ?? []), ...(t.tags ?? [])])],
      ...(t.for_each !== undefined ? { forEach: typeof t.for_each === 'string' ? { over: t.for_each } : { items: t.for_each } } : {}),
      ...(t.wait_for
        ? { waitFor: { signal: t.wait_for.signal, ...(t.wait_for.timeout !== undefined ? { timeoutSec: durationSeconds(t.wait_for.timeout) } : {}) } }
        : approval ? { approval } : concurrencyOf(t.concurrency ?? d.concurrency ?? file.concurrency)),
    };
  });
  return {
    name: file.name,
    title: file.title,
    description: file.description,
    params,
    budgetUsd: file.budget_usd,
    dailyBudgetUsd: file.daily_budget_usd,
    budgetLowAt: file.budget_low_at,
    idempotencyKey: file.idempotency_key,
    sourceFile,
    tasks,
    ...(file.schedule ? { schedule: scheduleNormalize(file.schedule, file.name) } : {}),
    ...(file.spawn ? { spawn: spawnNormalize(file.spawn, file.defaults ?? {}, templateValidation) } : {}),
  };
}

/** The spawn block as stored with the DAG: templates with the DAG's defaults applied and their steps resolved. */
function spawnNormalize(s: SpawnFile, d: NonNullable<DagFile['defaults']>, validation: Record<string, ValidationStep[]>): SpawnPolicy {
  const templates: Record<string, SpawnTemplate> = {};
  for (const [name, t] of Object.entries(s.templates ?? {})) {
    const estimate = t.estimate ?? d.estimate;
    templates[name] = {
      type: t.type,
      title: t.title,
      ...bodyAndConstraints(t.spec, d, [], t.workspace),
      priority: t.priority ?? d.priority,
      boostPerMinute: t.boost_per_minute ?? d.boost_per_minute,
      ...(estimate !== undefined ? { estimateSec: durationSeconds(estimate) } : {}),
      maxAttempts: t.max_attempts ?? d.max_attempts ?? TASK_DEFAULTS.maxAttempts,
      retry: retryNormalize({ ...d.retry, ...t.retry }),
      output: outputNormalize(t.output, validation[name] ?? []),
      tags: [...new Set([...(d.tags ?? []), ...(t.tags ?? [])])],
      accepts: [...new Set(t.accepts ?? [])],
      ...concurrencyOf(t.concurrency ?? d.concurrency),
    };
  }
  return { templates, freeForm: s.free_form ?? true, ...(s.max_tasks !== undefined ? { maxTasks: s.max_tasks } : {}) };
}

/** The agent-facing body and the constraints of a task or template, the DAG's defaults under its own. */
function bodyAndConstraints(
  spec: TaskFile['spec'], d: NonNullable<DagFile['defaults']>, context: string[], workspace?: WorkspaceFile, defaultWorkspace = true,
): { body: TaskBody; requiredCapabilities: string[]; maxCostUsd?: number; maxTokens?: number; maxDurationSec?: number; heartbeatSec?: number; estimatedTokens?: number } {
  const constraints = { ...d.constraints, ...spec?.constraints };
  const ws = workspace ?? (defaultWorkspace ? d.workspace : undefined);
  return {
    body: {
      prompt: spec?.prompt,
      context,
      models: spec?.models ?? d.models ?? [],
      fallbackModels: spec?.fallback_models ?? d.fallback_models ?? [],
      input: spec?.input ?? {},
      ...(ws ? { workspace: { repo: ws.repo, ...(ws.base !== undefined ? { base: ws.base } : {}), keep: ws.keep ?? WORKSPACE_KEEP_DEFAULT } } : {}),
    },
    requiredCapabilities: [...new Set(constraints.capabilities ?? [])].sort(),
    maxCostUsd: constraints.max_cost_usd,
    maxTokens: constraints.max_tokens,
    maxDurationSec: constraints.max_duration_sec,
    heartbeatSec: constraints.heartbeat_sec,
    estimatedTokens: constraints.estimated_tokens === undefined ? undefined : countValue(constraints.estimated_tokens),
  };
}

/**
 * A merge queue as stored (file checked by merge-check.ts): its repository (default the DAG's default workspace's,
 * already a real path), and the tasks whose branches land (mergeTasksOf).
 */
function mergeNormalize(m: MergeFile, tasks: string[], file: DagFile): MergeSpec {
  return {
    repo: mergeRepoOf(file, m)!,
    into: m.into,
    tasks: tasks.map((k) => ({ key: k, forEach: file.tasks[k]?.for_each !== undefined })),
    ...(m.test ? { test: { command: m.test.command, timeoutSec: m.test.timeout === undefined ? TEST_STEP_DEFAULTS.timeoutSec : durationSeconds(m.test.timeout), env: m.test.env ?? {} } } : {}),
    ...(m.resolver ? { resolver: m.resolver } : {}),
  };
}

function concurrencyOf(c: { key: string; limit: number } | undefined): { concurrency?: ConcurrencySpec } {
  return c ? { concurrency: { key: c.key, limit: c.limit } } : {};
}

function retryNormalize(r: RetryFile): RetryPolicy {
  const base = TASK_DEFAULTS.retry;
  return {
    strategy: r.strategy ?? base.strategy,
    initialDelaySec: r.initial_delay === undefined ? base.initialDelaySec : durationSeconds(r.initial_delay),
    multiplier: r.multiplier ?? base.multiplier,
    maxDelaySec: r.max_delay === undefined ? base.maxDelaySec : durationSeconds(r.max_delay),
    jitter: r.jitter ?? base.jitter,
    retryOn: r.retry_on,
    noRetryOn: r.no_retry_on ?? [],
  };
}

function scheduleNormalize(s: ScheduleFile, dagName: string): ScheduleSpec {
  return {
    name: s.name ?? dagName,
    cron: s.cron,
    timezone: s.timezone ?? SCHEDULE_DEFAULTS.timezone,
    catchup: s.catchup ?? SCHEDULE_DEFAULTS.catchup,
    catchupLimit: s.catchup_limit ?? SCHEDULE_DEFAULTS.catchupLimit,
    overlap: s.overlap ?? SCHEDULE_DEFAULTS.overlap,
    enabled: s.enabled ?? SCHEDULE_DEFAULTS.enabled,
    params: s.params ?? {},
  };
}

/** The stored output spec: the declared type, and the resolved steps (absent when there are none to run). */
export function outputNormalize(output: DagFile['tasks'][string]['output'], steps: ValidationStep[]): TaskSpec['output'] {
  if (!output) return undefined;
  return { ...(output.type ? { type: output.type } : {}), ...(steps.length ? { validation: steps } : {}) };
}
