import { z } from 'zod';
import { instant } from './instant.js';
import { rerunChangeSchema } from './dags.js';
import { jsonColumn, stepVerdictSchema } from './tasks.js';

/** What GET /api/dags/:id/compare/:other answers (engine/read/compare.ts DagComparison), as sent. */

const compareSideSchema = z.object({
  taskId: z.string(),
  status: z.string(),
  reusedFrom: z.string().nullable().describe('carried over by a rerun with a change, from this task: it ran nothing and cost nothing'),
  model: z.string().nullable().describe('the model of its last attempt that completed or failed (a carried task\'s: of the task that made its output)'),
  outputText: z.string().nullable().describe('its output as text (a string as it is, anything else as indented JSON), cut to output_chars; null: no output'),
  outputLength: z.number().describe('the whole text\'s length, in characters'),
  outputTruncated: z.boolean(),
  verdicts: z.array(stepVerdictSchema).describe('the validation verdicts of that attempt: what passed it, or what rejected its output'),
  costUsd: z.number().nullable().describe('what its attempts cost; null: cost unknown (a usage report had no price for its model)'),
  tokensIn: z.number(),
  tokensOut: z.number(),
  durationMs: z.number().nullable().describe('its attempts\' time working; null when none ran'),
  attempts: z.number(),
}).meta({ id: 'CompareSide' });

const compareTotalsSchema = z.object({
  tasks: z.number(),
  completed: z.number(),
  reused: z.number().describe('tasks carried over by a rerun with a change'),
  costUsd: z.number().describe('what the tasks of known cost cost'),
  costUnknownTasks: z.number().describe('tasks whose cost is unknown (not in costUsd)'),
  tokensIn: z.number(),
  tokensOut: z.number(),
  durationMs: z.number(),
  attempts: z.number(),
  verdicts: z.number(),
  verdictsPassed: z.number(),
});

const compareDagSchema = z.object({
  id: z.string(),
  name: z.string(),
  status: z.string(),
  createdAt: instant,
  completedAt: instant.nullable(),
  rerunOf: z.string().nullable(),
  rerunChange: jsonColumn(rerunChangeSchema.nullable()),
  totals: compareTotalsSchema,
});

export const dagCompareAnswerSchema = z.object({
  a: compareDagSchema,
  b: compareDagSchema,
  tasks: z.array(z.object({
    key: z.string(),
    a: compareSideSchema.nullable().describe('null: the first DAG has no task with this key'),
    b: compareSideSchema.nullable(),
    sameOutput: z.boolean().describe('both have an output, and they are equal (as JSON, whatever the key order)'),
  })).describe('per task key: the first DAG\'s tasks in its order, then those only the second has'),
  outputsDiffering: z.number().describe('keys both have whose outputs differ'),
}).meta({ id: 'DagComparison' });
export type DagCompareAnswer = z.infer<typeof dagCompareAnswerSchema>;
