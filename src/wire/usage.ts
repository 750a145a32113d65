import { z } from 'zod';
import { LIMITS } from '../config/index.js';
import { modelNameSchema } from '../llm-models.js';
import { USAGE_LIMITS, type UsageLimitName } from '../engine/attempt/usage-limits.js';

/** A usage report's body and answer (src/http/routes/usage.ts): the same fields as ctx.reportCost's, in the wire's names. */

export const usageReportBodyFields = {
  report_id: z.string().min(1).max(128).regex(/^[^\p{Cc}]+$/u, { error: 'printable characters' })
    .describe('your id for this report (unique within the attempt): the same report sent again after a lost reply is charged once'),
  cost_usd: z.number().min(0).max(LIMITS.reportCostUsd).nullable().optional()
    .describe('USD spent since your last report (not a running total); omitted: 0; null: cost unknown (you have no price for the model): kept and shown as unknown, its tokens still count'),
  tokens_in: z.number().int().min(0).max(LIMITS.reportTokens).optional().describe('input tokens since your last report, cached ones included'),
  tokens_out: z.number().int().min(0).max(LIMITS.reportTokens).optional(),
  cached_read_tokens: z.number().int().min(0).max(LIMITS.reportTokens).optional().describe('of tokens_in, those read from the provider\'s prompt cache'),
  cache_write_tokens: z.number().int().min(0).max(LIMITS.reportTokens).optional().describe('of tokens_in, those written to the provider\'s prompt cache'),
  model: modelNameSchema.nullable().optional().describe('the model the usage was on'),
};

const limitReachedSchema = z.union([
  z.object({ limit: z.enum(USAGE_LIMITS.filter((l) => l !== 'task.max_tokens') as [Exclude<UsageLimitName, 'task.max_tokens'>]), limitUsd: z.number(), spentUsd: z.number() }),
  z.object({ limit: z.literal('task.max_tokens'), limitTokens: z.number(), spentTokens: z.number() }),
]).meta({ id: 'LimitReached', description: 'a limit holding the attempt: in USD, or in tokens (in + out) for task.max_tokens' });

export const usageAnswerSchema = z.object({
  applied: z.boolean().describe('false: this report_id was charged before (a repeat); nothing was charged again'),
  attempt: z.object({ costUsd: z.number(), tokensIn: z.number(), tokensOut: z.number() }).describe('the attempt\'s usage charged so far'),
  remainingUsd: z.number().nullable().describe('USD left before the first limit holding the attempt; null: none holds it'),
  remainingTokens: z.number().nullable().describe('tokens (in + out) left under the task\'s max_tokens; null: none'),
  low: limitReachedSchema.nullable().describe('the first limit the attempt has spent its DAG\'s budget_low_at (default 80 %) of or more (none passed): time to wrap up'),
  stopped: limitReachedSchema.nullable().describe('set when this report took the attempt past a limit: it was stopped (failed budget_exceeded); stop working on the task'),
}).meta({ id: 'UsageAnswer' });

/** Where an attempt stands against its limits, before a call (GET /api/tasks/:id/budget). */
export const budgetAnswerSchema = usageAnswerSchema.omit({ applied: true, stopped: true }).meta({ id: 'BudgetAnswer' });
