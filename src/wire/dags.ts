import { z } from 'zod';
import { DAG_STATES } from '../model/state-machine.js';
import { deadLetterOfDagSchema } from './dlq.js';
import { instant } from './instant.js';
import { stepReplayViewSchema, stepViewSchema } from './steps.js';
import { jsonColumn } from './tasks.js';

/** What the DAG routes answer (src/http/routes/dags.ts), as sent (engine/read/inspect.ts, timeline.ts, engine/dag/*). */

const dagStatus = z.string().describe(`the DAG's state: ${DAG_STATES.join(', ')}`);

/** What a rerun with a change changed and ran (engine/dag/rerun-changed.ts RerunChangeRecord), as stored on the new DAG. */
export const rerunChangeSchema = z.object({
  model: z.string().nullable().describe('the model every LLM task ran on (--model); null: none given'),
  set: z.array(z.object({
    task: z.string().nullable().describe('the task it set a field of; null: every LLM task'),
    field: z.string().describe('prompt, models, fallback_models, input, input.NAME or constraints.NAME'),
    value: z.unknown(),
  })).describe('each spec field set (--set), as applied'),
  changed: z.array(z.string()).describe('the tasks whose spec the change altered'),
  rerunTasks: z.number().describe('how many tasks ran again: those changed, those downstream of one, and those the original had not completed'),
  reusedTasks: z.number().describe('how many were carried over completed with the original\'s output, at no cost'),
  by: z.string(),
  note: z.string().nullable(),
}).meta({ id: 'RerunChange' });
export type RerunChangeView = z.infer<typeof rerunChangeSchema>;

/** A row of `dags`, every column (db/rows.ts DagRow). */
export const dagViewSchema = z.object({
  id: z.string(),
  name: z.string(),
  title: z.string().nullable(),
  status: dagStatus,
  blockedReason: z.string().nullable().describe('why it is blocked: `budget: …`, `tenant quota: …`, or the dead letter\'s reason'),
  params: z.unknown().describe('the params it was submitted with, by name'),
  spec: z.unknown().describe('the DAG as submitted, normalized'),
  sourceFile: z.string().nullable(),
  budgetUsd: z.number().nullable(),
  spentUsd: z.number(),
  reservedUsd: z.number(),
  dailyBudgetUsd: z.number().nullable().describe('most it may spend in one UTC day; null: no cap'),
  daySpentUsd: z.number().describe('what it spent on spendDay (a figure of an earlier day is no longer counted)'),
  spendDay: z.string().nullable().describe('the UTC date daySpentUsd counts'),
  budgetLowAt: z.number().nullable().describe('the share of a limit past which a usage report says low; null: the default'),
  tasksTotal: z.number(),
  tasksOpen: z.number(),
  idempotencyKey: z.string().nullable(),
  createdBy: z.string(),
  spawnPolicy: z.unknown(),
  scheduledAt: instant.nullable(),
  createdAt: instant,
  updatedAt: instant,
  completedAt: instant.nullable(),
  prunedAt: instant.nullable().describe('when retention began deleting it; null otherwise'),
  tags: z.array(z.string()).describe('every tag its tasks carried at submit'),
  rerunOf: z.string().nullable().describe('a rerun with a change (dag rerun --model/--set): the finished DAG it re-ran; null otherwise'),
  rerunChange: jsonColumn(rerunChangeSchema.nullable()).describe('what that rerun changed, and how many tasks it ran again and carried over'),
  tenantId: z.string().describe('the tenant it belongs to'),
}).meta({ id: 'DagView' });
export type DagView = z.infer<typeof dagViewSchema>;

export const dagListAnswerSchema = z.object({
  dags: z.array(dagViewSchema.extend({ taskCounts: z.record(z.string(), z.number()).describe('its tasks by status') })),
  next: z.string().nullable().describe('the `cursor` of the page after; null on the last'),
});
export type DagListAnswer = z.infer<typeof dagListAnswerSchema>;
export type DagListed = DagListAnswer['dags'][number];

/** A task as the DAG's graph draws it. */
export const dagNodeSchema = z.object({
  id: z.string(),
  key: z.string(),
  type: z.string(),
  title: z.string().nullable(),
  status: z.string(),
  depth: z.number().describe('the longest path from a root'),
  parentKey: z.string().nullable().describe('a subtask\'s parent'),
  priority: z.number(),
  effectivePriority: z.number(),
  cpRankSec: z.number(),
  estimateSec: z.number(),
  attempts: z.number(),
  maxAttempts: z.number(),
  claimedBy: z.string().nullable(),
  lastError: z.string().nullable(),
  costUsd: z.number(),
  reusedFrom: z.string().nullable().describe('carried over by a rerun with a change: the task whose output it holds'),
});
export type DagNode = z.infer<typeof dagNodeSchema>;

export const dagEdgeSchema = z.object({ upstream: z.string(), downstream: z.string() }).describe('task keys');

/** A rerun with a change of a DAG, as its status and page list it. */
export const dagRerunRefSchema = z.object({ id: z.string(), status: dagStatus, createdAt: instant, createdBy: z.string() });

export const dagGraphAnswerSchema = z.object({
  dag: dagViewSchema,
  nodes: z.array(dagNodeSchema),
  edges: z.array(dagEdgeSchema),
  criticalPath: z.array(z.string()).describe('task keys, from the root with the largest upward rank'),
  deadLetters: z.array(deadLetterOfDagSchema).describe('its open dead letters'),
  reruns: z.array(dagRerunRefSchema).describe('the reruns with a change made of it (dag rerun --model/--set), oldest first (at most 100)'),
});
export type DagGraphAnswer = z.infer<typeof dagGraphAnswerSchema>;

/** A stretch of a task's time (engine/read/timeline.ts TimelineSegment). */
export const timelineSegmentSchema = z.object({
  kind: z.enum(['queued', 'running', 'validating', 'retry_wait', 'waiting']),
  from: instant,
  to: instant,
  attempt: z.number().optional(),
  outcome: z.string().optional().describe('how the attempt ended (`running` while it runs)'),
  model: z.string().nullable().optional(),
}).meta({ id: 'TimelineSegment' });
export type TimelineSegmentView = z.infer<typeof timelineSegmentSchema>;

/** A durable step an attempt recorded (engine/read/timeline.ts TimelineStep), drawn under its attempt. */
export const timelineStepSchema = stepViewSchema.pick({ name: true, scope: true, attempt: true, fence: true, durationMs: true, costUsd: true }).extend({
  from: instant.describe('when its work began: as its agent said (startedAt, else recordedAt less durationMs), kept within its attempt'),
  to: instant.describe('when it was recorded'),
}).meta({ id: 'TimelineStep' });
export type TimelineStepView = z.infer<typeof timelineStepSchema>;

export const timelineTaskSchema = z.object({
  id: z.string(),
  key: z.string(),
  type: z.string(),
  status: z.string(),
  parentKey: z.string().nullable(),
  costUsd: z.number(),
  critical: z.boolean().describe('on the path that decided when the DAG finished'),
  segments: z.array(timelineSegmentSchema),
  steps: z.array(timelineStepSchema).describe('the durable steps its attempts recorded, in the order recorded'),
  replays: z.array(stepReplayViewSchema).describe('the durable steps its attempts replayed instead of running, in order'),
});
export type TimelineTaskView = z.infer<typeof timelineTaskSchema>;

export const costByModelSchema = z.object({
  model: z.string().nullable(),
  costUsd: z.number(),
  tokensIn: z.number(),
  tokensOut: z.number(),
  attempts: z.number(),
});
export type CostByModelView = z.infer<typeof costByModelSchema>;

export const dagTimelineAnswerSchema = z.object({
  dagId: z.string(),
  from: instant,
  to: instant.describe('when the DAG finished, else now'),
  tasks: z.array(timelineTaskSchema),
  criticalPath: z.array(z.string()).describe('task keys, first to last, each waiting on the one before'),
  costByModel: z.array(costByModelSchema),
});
export type DagTimelineAnswer = z.infer<typeof dagTimelineAnswerSchema>;

/** What a submission came to, per DAG in the file: created (or found by its idempotency key), or a schedule registered. */
export const dagSubmitAnswerSchema = z.object({
  results: z.array(z.union([
    z.object({
      dagId: z.string(),
      name: z.string(),
      tasks: z.number(),
      created: z.boolean().describe('false when a DAG with the same idempotency key existed (its id is given)'),
      warnings: z.array(z.string()).optional(),
    }),
    z.object({ schedule: z.string(), nextFireAt: instant, warnings: z.array(z.string()).optional() }),
  ])),
});
export type DagSubmitAnswer = z.infer<typeof dagSubmitAnswerSchema>;

export const dagCancelAnswerSchema = z.object({ cancelled: z.number().describe('how many tasks were cancelled') });
export type DagCancelAnswer = z.infer<typeof dagCancelAnswerSchema>;

export const dagBudgetAnswerSchema = z.object({
  dagId: z.string(),
  previous: z.number().nullable(),
  budgetUsd: z.number(),
  status: dagStatus,
  blockedReason: z.string().nullable(),
});
export type DagBudgetAnswer = z.infer<typeof dagBudgetAnswerSchema>;

/** What a rerun with a change answers (engine/dag/rerun-changed.ts RerunChangedResult): the new DAG, and what it runs and carried over. */
export const dagRerunChangedAnswerSchema = z.object({
  dagId: z.string().describe('the new DAG'),
  rerunOf: z.string(),
  name: z.string(),
  tasks: z.number(),
  change: rerunChangeSchema,
  rerun: z.array(z.string()).describe('the tasks that run: those the change altered, those downstream of one, and those the original had not completed'),
  reused: z.array(z.string()).describe('the tasks carried over completed with the original\'s output, at no cost'),
  warnings: z.array(z.string()).optional().describe('what force let through: llm-judge steps no active judge can serve now'),
});
export type DagRerunChangedAnswer = z.infer<typeof dagRerunChangedAnswerSchema>;
