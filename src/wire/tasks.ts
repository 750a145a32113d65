import { z } from 'zod';
import { TASK_STATES } from '../model/state-machine.js';
import { TASK_ORIGINS } from '../dag/spec.js';
import { instant } from './instant.js';

/**
 * What the task routes answer (src/http/routes/tasks.ts), as sent: the rows the engine reads (engine/read/inspect.ts,
 * attempt-logs.ts) with their instants as text. The DAG, dead-letter and agent-protocol answers reuse the task row.
 */

/** A JSON column the engine types as `unknown`, whose JSON `schema` describes: the input stays unknown, the parse checks it. */
export function jsonColumn<T extends z.ZodType>(schema: T) {
  return z.unknown().pipe(schema);
}

const taskStatus = z.string().describe(`the task's state: ${TASK_STATES.join(', ')}`);

/** A task's body as its agent receives it (dag/spec.ts TaskBody), camelCase. */
export const taskBodySchema = z.object({
  prompt: z.string().optional(),
  context: z.array(z.string()).describe('context refs: upstream task keys, or paths into their outputs (plan.outline)'),
  models: z.array(z.string()),
  fallbackModels: z.array(z.string()),
  input: z.record(z.string(), z.unknown()),
  forEach: z.union([z.object({ over: z.string() }), z.object({ items: z.array(z.unknown()) })]).optional()
    .describe('a for_each task\'s list (no agent receives that task)'),
  workspace: z.object({
    repo: z.string().describe('the repository: its real path, as checked when the DAG was submitted, or its URL'),
    base: z.string().optional().describe('the ref each attempt starts from; absent: the repository\'s HEAD'),
    keep: z.enum(['never', 'on_failure']),
  }).optional().describe('a git worktree per attempt, made by dagent\'s agent runtime (docs/coding-agents.md); to an HTTP or MCP agent, data'),
  merge: z.object({
    repo: z.string().describe('the repository: its real path, as checked when the DAG was submitted'),
    into: z.string().describe('the branch the queue lands on'),
    tasks: z.array(z.object({ key: z.string(), forEach: z.boolean() })).describe('whose branches land, in order (a for_each task: its children\'s)'),
    test: z.object({ command: z.string(), timeoutSec: z.number(), env: z.record(z.string(), z.string()) }).optional(),
    resolver: z.string().optional().describe('the spawn template a conflict spawns a subtask from'),
  }).optional().describe('a merge queue, run by an agent with the merge capability (mergeQueueRun, docs/coding-agents.md)'),
}).meta({ id: 'TaskBody' });
export type TaskBodyView = z.infer<typeof taskBodySchema>;

/** A row of `tasks`, every column (db/rows.ts TaskRow). */
export const taskViewSchema = z.object({
  id: z.string(),
  dagId: z.string(),
  key: z.string().describe('unique in its DAG; a subtask\'s is `<parent key>/<key>`'),
  parentId: z.string().nullable(),
  hasChildren: z.boolean(),
  runAlone: z.boolean().describe('spared after a shared crash: its next attempts run alone (state-machine.md)'),
  lateDependents: z.boolean(),
  validatesId: z.string().nullable().describe('validation tasks: the task whose output this one judges'),
  validatesFence: z.number().nullable(),
  validationStep: z.number().nullable(),
  validatesAgent: z.string().nullable(),
  origin: z.string().describe(`who wrote the spec: ${TASK_ORIGINS.join(', ')}`),
  type: z.string(),
  title: z.string().nullable(),
  status: taskStatus,
  idempotencyKey: z.string().nullable(),
  spec: jsonColumn(taskBodySchema),
  contextKeys: z.array(z.string()),
  requiredCapabilities: z.array(z.string()),
  models: z.array(z.string()),
  concKey: z.string().nullable(),
  concLimit: z.number().nullable(),
  waitKey: z.string().nullable(),
  waitTimeoutSec: z.number().nullable(),
  capKey: z.string(),
  reservedUsd: z.number(),
  estimateSec: z.number(),
  cpRankSec: z.number().describe('upward rank: the longest path of estimates from this task to the end of its DAG'),
  deadlineMissed: z.boolean(),
  maxCostUsd: z.number().nullable(),
  maxTokens: z.number().nullable(),
  estimatedTokens: z.number().nullable(),
  maxDurationSec: z.number().nullable(),
  heartbeatSec: z.number().nullable(),
  priority: z.number(),
  boostPerMinute: z.number(),
  effectivePriority: z.number(),
  deadline: instant.nullable(),
  runAt: instant.nullable(),
  depsRemaining: z.number(),
  attempts: z.number(),
  maxAttempts: z.number(),
  attemptsResetFence: z.number(),
  claimLapses: z.number(),
  retryPolicy: z.unknown().describe('the retry policy: strategy, delays, retry_on and no_retry_on'),
  outputSpec: z.unknown().describe('what its output must be: schema and validation steps (null: anything)'),
  output: z.unknown().describe('its output once completed, else null'),
  tags: z.array(z.string()),
  claimedBy: z.string().nullable(),
  fence: z.number(),
  claimedAt: instant.nullable(),
  startedAt: instant.nullable(),
  leaseExpiresAt: instant.nullable(),
  heartbeatAt: instant.nullable(),
  progress: z.number().nullable(),
  progressMessage: z.string().nullable(),
  costUsd: z.number().describe('what its attempts cost, the one running included as it reports'),
  tokensIn: z.number(),
  tokensOut: z.number(),
  usageFence: z.number().nullable().describe('the claim whose usage attemptCostUsd and its tokens count (they count the running attempt when it equals fence)'),
  attemptCostUsd: z.number().describe('usage the attempt of usageFence reported while it ran, charged as reported'),
  attemptTokensIn: z.number(),
  attemptTokensOut: z.number(),
  lastError: z.string().nullable(),
  readyAt: instant.nullable(),
  createdAt: instant,
  updatedAt: instant,
  completedAt: instant.nullable(),
  reusedFrom: z.string().nullable().describe('in a rerun with a change: the task whose output this one carried over (completed with no attempt, at no cost); null for a task that ran'),
  tenantId: z.string().describe('its DAG\'s tenant'),
}).meta({ id: 'TaskView' });
export type TaskView = z.infer<typeof taskViewSchema>;

/** One validation step's verdict on an output, as recorded with the attempt (validation/verdict.ts StepVerdict). */
export const stepVerdictSchema = z.looseObject({
  step: z.number().describe('the index of the step in output.validation'),
  kind: z.string().describe('json-schema, regex, test, llm-judge, approval'),
  pass: z.boolean(),
  score: z.number().optional().describe('0–1, for judged steps'),
  reasons: z.array(z.string()).optional(),
  validation_task_id: z.string().optional(),
}).meta({ id: 'StepVerdict' });
export type StepVerdictView = z.infer<typeof stepVerdictSchema>;

/** What an attempt recorded beside its outcome: its validation verdicts, a failure's details. */
export const attemptDetailsSchema = z.looseObject({ verdicts: z.array(stepVerdictSchema).optional() }).nullable();

/** A row of `attempts`: one finished attempt of a task. */
export const attemptViewSchema = z.object({
  taskId: z.string(),
  dagId: z.string(),
  fence: z.number(),
  attempt: z.number(),
  agentId: z.string().nullable(),
  outcome: z.string().describe('completed, failed, validating, waiting, released, rate_limited, …'),
  errorClass: z.string().nullable(),
  errorMessage: z.string().nullable(),
  startedAt: instant,
  endedAt: instant,
  durationMs: z.number(),
  costUsd: z.number(),
  tokensIn: z.number(),
  tokensOut: z.number(),
  model: z.string().nullable(),
  replayedCostUsd: z.number().describe('what the durable steps this attempt replayed had cost when recorded: spend it did not pay again'),
  details: jsonColumn(attemptDetailsSchema),
}).meta({ id: 'AttemptView' });
export type AttemptView = z.infer<typeof attemptViewSchema>;

/** A row of `events`. */
export const eventViewSchema = z.object({
  id: z.number(),
  at: instant,
  type: z.string().describe('task.failed, task.dead_lettered, dag.completed, …'),
  dagId: z.string().nullable(),
  taskId: z.string().nullable(),
  agentId: z.string().nullable(),
  data: z.unknown(),
}).meta({ id: 'EventView' });
export type EventView = z.infer<typeof eventViewSchema>;

export const taskListAnswerSchema = z.object({ tasks: z.array(taskViewSchema) });
export type TaskListAnswer = z.infer<typeof taskListAnswerSchema>;

export const taskShowAnswerSchema = z.object({
  task: taskViewSchema,
  inputs: z.record(z.string(), z.unknown()).describe('its context refs resolved against the upstream outputs, by ref'),
  attempts: z.array(attemptViewSchema),
  events: z.array(eventViewSchema),
});
export type TaskShowAnswer = z.infer<typeof taskShowAnswerSchema>;

/** How much of an attempt's log was kept (engine/read/attempt-logs.ts). */
export const attemptLogStatsSchema = z.object({
  fence: z.number(),
  attempt: z.number(),
  lines: z.number(),
  bytes: z.number(),
  dropped: z.number().describe('lines past the attempt\'s allowance'),
});

/** A log line's id: a 64-bit integer, which the read model's SQL gives as a decimal string (its row type says number). */
const logLineId = z.codec(z.union([z.number(), z.string()]), z.string(), { decode: (v) => String(v), encode: (s) => s })
  .describe('the line\'s id, a 64-bit integer as a decimal string');

export const logLineSchema = z.object({
  id: logLineId,
  level: z.string(),
  message: z.string(),
  fields: z.record(z.string(), z.unknown()).nullable(),
  at: instant.describe('when it was logged'),
});
export type LogLineView = z.infer<typeof logLineSchema>;

export const taskLogAnswerSchema = z.object({
  attempts: z.array(attemptLogStatsSchema).describe('every attempt of the task that logged, oldest first'),
  attempt: attemptLogStatsSchema.extend({
    entries: z.array(logLineSchema),
    running: z.boolean(),
    next: z.union([z.string(), z.number()]).describe('the `after` of the next page: the last line\'s id (a decimal string), or the `after` given (0 by default) when no line came'),
  }).optional().describe('the attempt shown; absent when the task has logged nothing'),
});
export type TaskLogAnswer = z.infer<typeof taskLogAnswerSchema>;

/** A task a person's action moved, and the state it left. */
export const movedTaskSchema = z.object({ id: z.string(), key: z.string(), previous: taskStatus });

export const taskCancelAnswerSchema = z.object({ cancelled: z.array(movedTaskSchema).describe('the task and what can no longer run') });
export type TaskCancelAnswer = z.infer<typeof taskCancelAnswerSchema>;

export const priorityAnswerSchema = z.object({ tasks: z.number().describe('how many tasks\' base priority changed') });
export type PriorityAnswer = z.infer<typeof priorityAnswerSchema>;

export const rerunAnswerSchema = z.object({
  dagId: z.string(), reopened: z.array(movedTaskSchema),
  stepsDropped: z.number().int().describe('durable steps deleted: the re-run does that work again (those kept, it replays)'),
});
export type RerunAnswer = z.infer<typeof rerunAnswerSchema>;
