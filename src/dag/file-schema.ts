import { z } from 'zod';
import { USAGE_DEFAULTS } from '../config/index.js';
import { durationSchema } from '../durations.js';
import { RESERVED_NAMES } from '../json-guard.js';
import { modelNameSchema } from '../llm-models.js';
import { countSchema } from '../counts.js';
import { STEP_FILE_FIELDS, validationStepFileSchema } from '../validation/steps/index.js';
import { approvalTaskFileSchema } from '../validation/steps/approval.js';

/**
 * The DAG file format, as written in `dags/*.yaml`. Kept free of transforms so
 * `dagent schema` can export it as JSON Schema for editors; normalize.ts turns a
 * parsed file into the engine's DagSpec.
 */

export const KEY_PATTERN = /^[a-z][a-z0-9_-]{0,63}$/;
/** A capability: a key, optionally namespaced (`validate:test`). */
export const CAPABILITY_PATTERN = /^[a-z][a-z0-9_-]{0,63}(:[a-z][a-z0-9_-]{0,63})?$/;
export const capabilitySchema = z.string().regex(CAPABILITY_PATTERN, { error: 'must be a capability like llm or validate:test (lowercase, digits, _ and -, one optional namespace:)' });
export const ERROR_CLASS_PATTERN = /^[a-z][a-z0-9_]{0,63}$/;
export const BUILTIN_ERROR_CLASSES = [
  'timeout', 'crash', 'rate_limit', 'invalid_output', 'auth_failure', 'budget_exceeded', 'cancelled',
] as const;

const MAX_TEXT = 100_000;
const shortText = z.string().max(200);
/** The part of a name (`review_api/constructor`: either side of the `/`) that every JavaScript object already has. */
const reservedPart = (name: string): string | undefined => name.split('/').find((part) => RESERVED_NAMES.has(part));
/**
 * A name dagent looks up (a task key, a group's, a subtask's, a param): never one that every JavaScript object
 * already has (RESERVED_NAMES), nor a ref with such a part. Checked before the name's pattern, so `toString` is
 * refused as reserved, as `constructor` is, not only for its capital letter.
 */
const notReserved = (what: string) => [
  (name: string) => reservedPart(name) === undefined,
  { error: (issue: { input: unknown }) => `"${reservedPart(String(issue.input))}" is a reserved name; choose another ${what}` },
] as const;
/** A task key, a group's, a subtask's (local: the spawn stores it as `<parent>/<key>`), a type, a DAG's name. */
export const keySchema = z.string().refine(...notReserved('key')).regex(KEY_PATTERN, { error: 'must match ^[a-z][a-z0-9_-]*$ (max 64 chars)' });
/**
 * A task as other tasks name it: its key, or a group's task (`review_api/lint`). `/` joins a group and its
 * tasks as it joins a parent and the subtasks it spawns; `.` is kept for paths into outputs (`plan.files`).
 */
export const TASK_REF_PATTERN = /^[a-z][a-z0-9_-]{0,63}(\/[a-z][a-z0-9_-]{0,63})?$/;
const taskRef = z.string().refine(...notReserved('key')).regex(TASK_REF_PATTERN, { error: 'must be a task key, or a group\'s task (review_api/lint)' });
const duration = durationSchema;
const instant = z.string().max(64)
  .describe('ISO 8601 date-time with offset (2026-12-01T09:00:00Z), or a duration from submission (2h)');
const errorClass = z.string().regex(ERROR_CLASS_PATTERN, { error: 'must be an error class like timeout or rate_limit' })
  .describe(`an error class: ${BUILTIN_ERROR_CLASSES.join(', ')}, or a custom one (lowercase, digits, _)`);
const money = z.number().nonnegative().max(1_000_000);

export const constraintsSchema = z.strictObject({
  max_cost_usd: money.optional().describe('most this task may cost per attempt; claims only by agents whose budget covers it'),
  max_tokens: z.number().int().positive().max(1_000_000_000).optional()
    .describe('most tokens (in + out) one attempt may report; past it the attempt is stopped (budget_exceeded)'),
  max_duration_sec: z.number().int().positive().max(7 * 24 * 3600).optional(),
  heartbeat_sec: z.number().int().positive().max(3600).optional()
    .describe('how often the agent heartbeats while running (default 20); the lease lasts three beats'),
  capabilities: z.array(capabilitySchema).max(32).optional().describe('capabilities an agent must have to claim the task'),
  estimated_tokens: countSchema.optional()
    .describe('tokens an attempt is expected to use (in + out): reserved against its model\'s declared tokens-per-minute limit at claim, corrected by the tokens it reports. Default: the limit\'s default_tokens'),
});

/**
 * At most `limit` tasks with this key are claimed or running at once, across DAGs (`repo:${params.repo}`):
 * the others wait READY while the claim passes over them to other work.
 */
export const concurrencySchema = z.strictObject({
  key: z.string().min(1).max(200).describe('tasks that share this key share its limit, across DAGs; ${params…} is filled in'),
  limit: z.number().int().min(1).max(10_000).describe('most tasks with the key claimed or running at once'),
});

/** A signal's key: what `POST /api/signals/KEY` and `dagent signal KEY` name (no slash, so it fits a URL path segment). */
export const SIGNAL_KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:@=+-]{0,199}$/;
export const signalKeySchema = z.string().regex(SIGNAL_KEY_PATTERN, {
  error: 'a signal key is 1–200 letters, digits and _ . : @ = + -, starting with a letter or digit (deploy:prod, ci:4f2a9c1)',
});

/**
 * A task no agent runs: it waits until a signal is sent to its key, and the signal's payload becomes its output.
 * A signal sent while the task still waited on its upstream tasks (after the task was created) counts.
 */
export const waitForSchema = z.strictObject({
  signal: signalKeySchema.describe('the key the signal is sent to (POST /api/signals/KEY, dagent signal KEY); ${params…} is filled in'),
  timeout: duration.optional()
    .describe('how long each attempt waits; then it fails with class timeout and is dead-lettered unless max_attempts allows another wait. Default: no limit'),
});

export const retrySchema = z.strictObject({
  strategy: z.enum(['exponential', 'fixed', 'immediate']).optional(),
  initial_delay: duration.optional(),
  multiplier: z.number().min(1).max(100).optional(),
  max_delay: duration.optional(),
  jitter: z.number().min(0).max(1).optional().describe('fraction of the delay added or removed at random'),
  retry_on: z.array(errorClass).max(32).optional(),
  no_retry_on: z.array(errorClass).max(32).optional(),
});


/**
 * A git ref a worktree starts from (main, v1.2, origin/main, HEAD~1, a commit): letters, digits and . _ / @ ^ ~ + -,
 * never starting with - (it reaches git as an argument, never as an option).
 */
export const GIT_REF_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9._/@^~+-]{0,199}$/;

/**
 * A git worktree of its own for each attempt (docs/coding-agents.md): made before the handler runs on a branch
 * dagent/<dag id>/<task key>, handed to it as ctx.workspace, removed when the attempt ends.
 */
export const workspaceSchema = z.strictObject({
  repo: z.string().min(1).max(1000)
    .describe('the git repository: a path, relative to the DAG file, inside its directory or the directories DAGENT_FILE_ROOTS allows; or a URL, cloned by an agent whose DAGENT_WORKSPACE_REPO_URLS allows it'),
  base: z.string().regex(GIT_REF_PATTERN, { error: 'must be a git ref or commit (main, v1.2, HEAD~1): letters, digits and . _ / @ ^ ~ + -, not starting with -' }).optional()
    .describe('the branch, tag or commit the worktree starts from; default the repository\'s HEAD (its checked-out branch)'),
  keep: z.enum(['never', 'on_failure']).optional()
    .describe('on_failure: keep the worktree of a failed attempt for debugging (until DAGENT_RETENTION_WORKSPACES); default never'),
});

/**
 * A branch name a merge queue lands work on (main, release/1.2): letters, digits and . _ / -, never starting with
 * - or ending with / or .lock (git's own rules, the part a DAG needs).
 */
export const GIT_BRANCH_PATTERN = /^(?!.*\.\.)(?!.*\/\/)(?!.*\.lock$)[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}(?<![/.])$/;

/**
 * A merge queue (docs/coding-agents.md, "The merge queue"): an agent with the `merge` capability lands the branches of
 * the listed tasks' worktrees on `into`, one at a time, each after a `git merge-tree` preflight and, when `test` is
 * set, the command passing in the merged tree; a conflict spawns a subtask from the `resolver` template.
 */
export const mergeSchema = z.strictObject({
  into: z.string().regex(GIT_BRANCH_PATTERN, { error: 'must be a branch name (main, release/1.2): letters, digits and . _ / -, not starting with -' })
    .describe('the branch the queue lands the tasks\' branches on; it moves only to a merge that passed the preflight and the test'),
  repo: z.string().min(1).max(1000).optional()
    .describe('the repository, a path as in workspace.repo; default the repository of the DAG\'s defaults.workspace'),
  tasks: z.array(taskRef).min(1).max(1000).optional()
    .describe('the tasks whose branches land, in this order (a for_each task: its children\'s, in item order); default the depends_on tasks that have a workspace'),
  test: z.strictObject({
    command: z.string().min(1).max(4000),
    timeout: durationSchema.optional().describe('kill the command after this long (default 5m): the branch does not land'),
    env: z.record(z.string(), z.string()).optional(),
  }).optional().describe('a command run at the root of a worktree of each merge before the branch lands: exit 0 lands it, anything else leaves the target where it was'),
  resolver: keySchema.optional()
    .describe('a spawn template (with a workspace on the same repository, accepting the input field `conflict`): a branch that conflicts spawns a subtask from it, whose branch then lands'),
});

export const outputSchema = z.strictObject({
  type: z.enum(['json', 'text', 'markdown', 'code', 'any']).optional(),
  validation: z.union([validationStepFileSchema, z.array(validationStepFileSchema).max(10)]).optional(),
});

export const contextRefSchema = z.string().regex(/^[a-z][a-z0-9_-]{0,63}(\/[a-z][a-z0-9_-]{0,63})?(\.[A-Za-z0-9_-]+)*$/, {
  error: 'must be an upstream task key, optionally followed by a path into its output (research.summary)',
});

/**
 * What a mapped task runs once per item: a context ref to a list in an upstream task's output (`plan.files`), or a
 * list written out or given as a list param (`${params.repos}`). Checked for length against LIMITS.mapItems.
 */
export const forEachSchema = z.union([contextRefSchema, z.array(z.unknown())])
  .describe('run the task once per item of this list: a ref to a list in an upstream output (plan.files), or a list (${params.repos}). Each child gets spec.input.item and spec.input.index; the task completes with their outputs, in order');

export const taskBodySchema = z.strictObject({
  prompt: z.string().max(MAX_TEXT).optional(),
  context: z.array(contextRefSchema).max(64).optional().describe('upstream outputs handed to the task at claim'),
  constraints: constraintsSchema.optional(),
  models: z.array(modelNameSchema).max(16).optional().describe('models the task accepts, in order of preference: only an agent with one of them claims it'),
  fallback_models: z.array(modelNameSchema).max(16).optional().describe('used instead of models from retry 2 on'),
  input: z.record(z.string(), z.unknown()).optional().describe('free-form input for the agent'),
});

/** The input fields for_each fills in for each child: the item, and its place in the list (from 0). */
export const MAP_INPUT_FIELDS = ['item', 'index'] as const;

const priority = z.number().int().min(0).max(100).describe('0–100, lower is more urgent');
const taskCommon = {
  priority: priority.optional(),
  estimate: duration.optional().describe('expected run time; default the median of completed tasks of the same type, else 60s. Feeds the critical path'),
  boost_per_minute: z.number().min(0).max(100).optional(),
  max_attempts: z.number().int().min(1).max(100).optional(),
  retry: retrySchema.optional(),
  tags: z.array(z.string().max(64)).max(32).optional(),
  concurrency: concurrencySchema.optional(),
};

export const taskSchema = z.strictObject({
  type: keySchema,
  title: shortText.optional(),
  spec: taskBodySchema.optional(),
  ...taskCommon,
  deadline: instant.optional(),
  not_before: instant.optional(),
  depends_on: z.array(taskRef).optional().describe('upstream tasks (or groups: all their last tasks): this one is READY once they have all completed (at most 10,000 by default: DAGENT_LIMIT_UPSTREAM_PER_TASK)'),
  idempotency_key: z.string().min(1).max(200).optional(),
  output: outputSchema.optional(),
  workspace: workspaceSchema.optional().describe('run each attempt in a git worktree of its own, on branch dagent/<dag id>/<task key>'),
  wait_for: waitForSchema.optional().describe('no agent runs this task: it completes when a signal is sent to the key, with the signal\'s payload as its output'),
  approval: approvalTaskFileSchema.optional(),
  for_each: forEachSchema.optional(),
  merge: mergeSchema.optional().describe('a merge queue: an agent with the merge capability lands the listed tasks\' branches on a target branch (docs/coding-agents.md)'),
}).superRefine((t, ctx) => {
  if (t.for_each !== undefined) {
    const waits = t.wait_for ? 'wait_for' : t.approval ? 'approval' : undefined;
    if (waits) ctx.addIssue({ code: 'custom', path: ['for_each'], message: `a task with ${waits} runs no agent, so it cannot run once per item: remove for_each or ${waits}` });
    const input = t.spec?.input ?? {};
    for (const f of MAP_INPUT_FIELDS) {
      if (Object.hasOwn(input, f)) ctx.addIssue({ code: 'custom', path: ['spec', 'input', f], message: `for_each fills in spec.input.${f} for each child: choose another name` });
    }
  }
  // A waiting task runs nothing: fields that tell an agent what to do, or check what it returns, would silently do nothing.
  if (t.wait_for && t.approval) ctx.addIssue({ code: 'custom', path: ['approval'], message: 'a task waits either for a signal (wait_for) or for a person (approval), not both' });
  if (t.merge) {
    // A merge task works in the repository itself, not in a worktree; what lands is the listed tasks' work.
    const other = t.wait_for ? 'wait_for' : t.approval ? 'approval' : t.for_each !== undefined ? 'for_each' : t.workspace ? 'workspace' : undefined;
    if (other) ctx.addIssue({ code: 'custom', path: ['merge'], message: `a merge task cannot also have ${other}: remove one` });
  }
  const waits = t.wait_for ? 'wait_for' : t.approval ? 'approval' : undefined;
  if (!waits) return;
  const why = waits === 'wait_for' ? 'the signal\'s payload is its output' : 'the approver\'s decision is its output; to approve an agent\'s output, put an approval step in that task\'s output.validation';
  for (const field of ['spec', 'output', 'concurrency', 'workspace'] as const) {
    if (t[field] !== undefined) ctx.addIssue({ code: 'custom', path: [field], message: `a task with ${waits} runs no agent: remove ${field} (${why})` });
  }
});


/** An input field name an agent may fill in (`accepts`), or a shell agent exports as DAGENT_INPUT_<NAME>. */
const inputFieldName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'an input field name must match ^[A-Za-z_][A-Za-z0-9_]*$' }).refine(...notReserved('field name'));

/**
 * A kind of subtask the DAG's agents may spawn: everything but what the agent
 * fills in is the DAG author's (type, capabilities, constraints, validation, retries,
 * the fixed input fields), so a template may say what runs; the agent supplies data.
 */
export const spawnTemplateSchema = z.strictObject({
  type: keySchema,
  title: shortText.optional(),
  spec: taskBodySchema.optional(),
  ...taskCommon,
  output: outputSchema.optional(),
  workspace: workspaceSchema.optional().describe('a worktree for each attempt of a subtask spawned from this template (the agent cannot choose or change it)'),
  accepts: z.array(inputFieldName).max(32).optional()
    .describe('input fields an agent may fill in when it spawns from this template (data only); spec.input fields are fixed. Default none'),
});

export const spawnSchema = z.strictObject({
  templates: z.record(keySchema, spawnTemplateSchema).optional().describe('subtasks agents may spawn by name (template: NAME), with what runs fixed here'),
  free_form: z.boolean().optional()
    .describe('whether agents may also spawn subtasks of their own making: data only, no capabilities, no validation but inline checks. Default true'),
  max_tasks: z.number().int().min(0).max(100_000).optional().describe('most subtasks agents may add to this DAG in all. Default: up to the DAG task limit'),
}).describe('what the agents working this DAG may add to it at runtime');

export const defaultsSchema = z.strictObject({
  ...taskCommon,
  constraints: constraintsSchema.optional(),
  models: z.array(modelNameSchema).max(16).optional(),
  fallback_models: z.array(modelNameSchema).max(16).optional(),
  workspace: workspaceSchema.optional().describe('a worktree for each attempt of every task that runs an agent, unless the task names its own'),
});

const paramScalar = z.union([z.string().max(MAX_TEXT), z.number(), z.boolean()]);
/** A list param (`repos: [api, web]`): a for_each may map over it; in text it reads as its items joined by ", ". */
const paramList = z.array(paramScalar).max(10_000);
export const paramSchema = z.union([
  z.string().max(MAX_TEXT), z.number(), z.boolean(), paramList,
  z.strictObject({
    default: z.union([paramScalar, paramList]).optional(),
    description: z.string().max(2000).optional(),
    required: z.boolean().optional(),
  }),
]);

export const scheduleSchema = z.strictObject({
  name: keySchema.optional().describe('the schedule\'s name; default the DAG\'s name'),
  cron: z.string().min(1).max(200).describe('cron expression (croner): 5 fields, or 6 with seconds first; @daily and friends'),
  timezone: z.string().min(1).max(64).optional().describe('IANA time zone the cron expression is read in; default UTC'),
  catchup: z.enum(['none', 'latest', 'all']).optional()
    .describe('fires missed while no scheduler ran: none (skip them), latest (run the latest once; default), all (run each, up to catchup_limit)'),
  catchup_limit: z.number().int().min(1).max(1000).optional().describe('most missed fires run with catchup: all; default 10'),
  overlap: z.enum(['allow', 'skip', 'cancel_previous']).optional()
    .describe('when the previous run is still going: allow (default), skip this fire, or cancel the previous run'),
  enabled: z.boolean().optional().describe('default true'),
  params: z.record(z.string(), z.union([z.string().max(MAX_TEXT), z.number(), z.boolean()])).optional()
    .describe('params for every fire; a param named scheduled_at receives the fire\'s scheduled instant'),
});

/**
 * A group: a template's tasks, expanded at submit into `<group>/<task>`. Edges to the group reach its first
 * tasks (those with no upstream inside it); a task that depends on the group waits for its last ones.
 */
export const taskGroupSchema = z.strictObject({
  use: z.string().min(1).max(1000).describe('a template file (templates/review.yaml), relative to this DAG file'),
  with: z.record(z.string(), z.union([paramScalar, paramList])).optional().describe('values for the template\'s params'),
  depends_on: z.array(taskRef).optional().describe('upstream tasks of the group: its first tasks wait for them'),
  tags: z.array(z.string().max(64)).max(32).optional().describe('added to every task of the group'),
});
export type TaskGroupFile = z.infer<typeof taskGroupSchema>;

export const dagFileSchema = z.strictObject({
  name: keySchema,
  title: shortText.optional(),
  description: z.string().max(10_000).optional(),
  params: z.record(
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'a param name must match ^[A-Za-z_][A-Za-z0-9_]*$' }).refine(...notReserved('param name')),
    paramSchema,
  ).optional(),
  budget_usd: money.optional().describe('ceiling on the DAG’s total spend'),
  daily_budget_usd: money.optional().describe('ceiling on the DAG’s spend in one UTC day: past it its running attempts are stopped and its tasks wait for the next day'),
  budget_low_at: z.number().gt(0).lt(1).optional()
    .describe(`the share of a limit past which a usage report's answer says low (time to wrap up); default ${USAGE_DEFAULTS.lowAt}`),
  idempotency_key: z.string().min(1).max(200).optional(),
  defaults: defaultsSchema.optional(),
  concurrency: concurrencySchema.optional().describe('a concurrency key every task of the DAG shares unless it (or defaults) names its own; across runs and DAGs'),
  tasks: z.record(keySchema, z.union([taskSchema, taskGroupSchema])).refine((t) => Object.keys(t).length > 0, { error: 'a DAG needs at least one task' }),
  schedule: scheduleSchema.optional().describe('run this DAG on a cron schedule: submitting the file registers the schedule'),
  spawn: spawnSchema.optional(),
});

/**
 * The file after its groups were expanded (templates.ts): what the loader checks. A group's tasks are
 * `group/key`; every other task key is a plain key (a `/` written in a file is refused before this).
 */
export const dagExpandedSchema = dagFileSchema.extend({
  tasks: z.record(z.string().refine(...notReserved('key')).regex(TASK_REF_PATTERN, { error: 'must match ^[a-z][a-z0-9_-]*$ (max 64 chars)' }), taskSchema).refine((t) => Object.keys(t).length > 0, { error: 'a DAG needs at least one task' }),
});

/** A task-group template (dags/templates/*.yaml): a small sub-DAG with params of its own, used by DAGs as a group. */
export const templateFileSchema = z.strictObject({
  title: shortText.optional(),
  description: z.string().max(10_000).optional(),
  params: dagFileSchema.shape.params,
  tasks: z.record(keySchema, taskSchema).refine((t) => Object.keys(t).length > 0, { error: 'a template needs at least one task' }),
});

export type DagFile = z.infer<typeof dagExpandedSchema>;
export type TemplateFile = z.infer<typeof templateFileSchema>;
export type TaskFile = z.infer<typeof taskSchema>;
export type WaitForFile = z.infer<typeof waitForSchema>;
export type RetryFile = z.infer<typeof retrySchema>;
export type ScheduleFile = z.infer<typeof scheduleSchema>;
export type SpawnFile = z.infer<typeof spawnSchema>;
export type SpawnTemplateFile = z.infer<typeof spawnTemplateSchema>;
export type WorkspaceFile = z.infer<typeof workspaceSchema>;
export type MergeFile = z.infer<typeof mergeSchema>;

/** Which object schema applies at a path: used to suggest the key a typo meant. */
export function objectKeysAt(path: readonly (string | number)[]): string[] | undefined {
  const last = path[path.length - 1];
  const parent = path[path.length - 2];
  if (path.length === 0) return Object.keys(dagFileSchema.shape);
  if (path.length === 2 && path[0] === 'tasks') return Object.keys(taskSchema.shape);
  if (path.length === 3 && path[0] === 'spawn' && path[1] === 'templates') return Object.keys(spawnTemplateSchema.shape);
  if (path.length === 2 && path[0] === 'params') return ['default', 'description', 'required'];
  if (last === 'test' && parent === 'merge') return ['command', 'timeout', 'env'];
  switch (last) {
    case 'defaults': return Object.keys(defaultsSchema.shape);
    case 'spec': return Object.keys(taskBodySchema.shape);
    case 'constraints': return Object.keys(constraintsSchema.shape);
    case 'retry': return Object.keys(retrySchema.shape);
    case 'output': return Object.keys(outputSchema.shape);
    case 'schedule': return Object.keys(scheduleSchema.shape);
    case 'spawn': return Object.keys(spawnSchema.shape);
    case 'wait_for': return Object.keys(waitForSchema.shape);
    case 'approval': return Object.keys(approvalTaskFileSchema.shape);
    case 'workspace': return Object.keys(workspaceSchema.shape);
    case 'merge': return Object.keys(mergeSchema.shape);
    case 'validation': return undefined;
  }
  if (parent === 'validation' || typeof last === 'number') return [...STEP_FILE_FIELDS];
  return undefined;
}
