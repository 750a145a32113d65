import { z } from 'zod';
import { instant } from './instant.js';
import { attemptDetailsSchema, jsonColumn, taskViewSchema } from './tasks.js';

/** What the dead-letter routes answer (src/http/routes/dlq.ts), as sent (engine/ops/dlq.ts). */

const deadLetterFields = {
  id: z.string(),
  taskId: z.string(),
  dagId: z.string(),
  createdAt: instant,
  attempts: z.number().describe('attempts the task had made when it was dead-lettered'),
  reason: z.string().describe('attempts_exhausted, poison_pill, non_retryable, no_retry_on, not_in_retry_on, …'),
  errorClass: z.string().nullable(),
  poisonPill: z.boolean(),
  totalCostUsd: z.number(),
  resolution: z.string().nullable().describe('retried or cancelled; null while open'),
  resolvedAt: instant.nullable(),
  resolvedBy: z.string().nullable(),
  resolvedNote: z.string().nullable(),
};

/** An instant in a history entry: text in the stored JSON, sent as ISO 8601 in UTC (db/queries/dead-letters.ts deadLetterGet). */
const historyInstant = z.string().meta({ format: 'date-time' }).describe('ISO 8601 in UTC (2026-11-27T09:30:00.123Z)');

/** An attempt as a dead letter's history keeps it (snake_case). */
export const historyAttemptSchema = z.object({
  attempt: z.number(),
  fence: z.number(),
  agent: z.string().nullable(),
  outcome: z.string(),
  error_class: z.string().nullable(),
  error: z.string().nullable(),
  started_at: historyInstant,
  ended_at: historyInstant,
  duration_ms: z.number(),
  cost_usd: z.number(),
  model: z.string().nullable(),
  details: attemptDetailsSchema,
}).meta({ id: 'HistoryAttempt' });
export type HistoryAttempt = z.infer<typeof historyAttemptSchema>;

/** A row of `dead_letters`, with its history: every attempt at dead-letter time. */
export const deadLetterViewSchema = z.object({
  ...deadLetterFields,
  history: jsonColumn(z.array(historyAttemptSchema)).describe('every attempt at dead-letter time, oldest first'),
}).meta({ id: 'DeadLetterView' });
export type DeadLetterView = z.infer<typeof deadLetterViewSchema>;

/** An open entry as a DAG's graph shows it: without its history, with its task's key. */
export const deadLetterOfDagSchema = z.object({ ...deadLetterFields, taskKey: z.string() });

/** An entry as the list shows it: without its history, with its task's key and type. */
export const deadLetterListedSchema = z.object({ ...deadLetterFields, taskKey: z.string(), taskType: z.string() });
export type DeadLetterListed = z.infer<typeof deadLetterListedSchema>;

export const dlqPageAnswerSchema = z.object({
  entries: z.array(deadLetterListedSchema),
  next: z.string().nullable().describe('the `cursor` of the page after; null on the last'),
});
export type DlqPageAnswer = z.infer<typeof dlqPageAnswerSchema>;

export const dlqShowAnswerSchema = z.object({ entry: deadLetterViewSchema, task: taskViewSchema });
export type DlqShowAnswer = z.infer<typeof dlqShowAnswerSchema>;

export const dlqEntryAnswerSchema = z.object({ entry: deadLetterViewSchema });
export type DlqEntryAnswer = z.infer<typeof dlqEntryAnswerSchema>;

export const dlqBulkAnswerSchema = z.object({ action: z.enum(['retry', 'cancel']), ids: z.array(z.string()).describe('the entries resolved, oldest first') });
export type DlqBulkAnswer = z.infer<typeof dlqBulkAnswerSchema>;
