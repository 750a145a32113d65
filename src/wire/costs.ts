import { z } from 'zod';
import { USAGE_LIMITS } from '../engine/attempt/usage-limits.js';
import { COSTS_DEFAULTS } from '../config/index.js';
import { SHARED_SPEND } from './fleet.js';

/**
 * What GET /api/costs takes and answers (src/http/routes/costs.ts), as sent: the spend report of `dagent costs`
 * (engine/ops/priority.ts costsReport, db/queries/costs.ts), and the usage ledger by model (db/queries/usage.ts).
 */

export const costsQuerySchema = z.object({
  days: z.coerce.number().int().min(1).max(COSTS_DEFAULTS.daysMax).optional()
    .describe(`UTC days of daily spend and of stops, today included: 1 to ${COSTS_DEFAULTS.daysMax}; default ${COSTS_DEFAULTS.days}`),
});

const usd = z.number().describe('USD');
const usdOrNone = z.number().nullable();

export const costsAnswerSchema = z.object({
  days: z.array(z.object({
    day: z.string().describe('YYYY-MM-DD, UTC'),
    costUsd: usd,
    attempts: z.number().describe('attempts that ended that day'),
  })).describe('spend per UTC day, from the attempts that ended that day; days without one are left out'),
  agents: z.array(z.object({
    id: z.string(),
    budgetUsd: usdOrNone.describe('null: no budget'),
    spentUsd: usdOrNone.describe(SHARED_SPEND),
    reservedUsd: usdOrNone.describe(`what its claimed and running tasks hold against its budget; ${SHARED_SPEND}`),
    remainingUsd: usdOrNone.describe(`budget − spent − reserved; null: no budget, or ${SHARED_SPEND}`),
  })).describe('every agent, most spent first'),
  dags: z.array(z.object({
    id: z.string(),
    name: z.string(),
    status: z.string(),
    budgetUsd: usdOrNone.describe('null: no budget'),
    spentUsd: usd,
    reservedUsd: usd.describe('the max costs its held tasks reserve'),
    remainingUsd: usdOrNone.describe('budget − spent − reserved; null: no budget'),
  })).describe(`the ${COSTS_DEFAULTS.dags} DAGs that spent most, of those that spent, reserved or have a budget`),
  running: z.array(z.object({
    taskId: z.string(),
    dagId: z.string(),
    key: z.string(),
    agentId: z.string().nullable(),
    fence: z.number(),
    spentUsd: usd.describe('what this attempt has reported so far (charged as reported)'),
    reservedUsd: usd.describe('what its claim still reserves'),
    maxCostUsd: usdOrNone.describe('the task\'s max_cost_usd; null: none'),
  })).describe(`attempts running now that reported usage or are held to a cost, most spent first (at most ${COSTS_DEFAULTS.running})`),
  stops: z.array(z.object({
    at: z.string().meta({ format: 'date-time' }).describe('when the attempt was stopped, ISO 8601 in UTC'),
    taskId: z.string(),
    key: z.string(),
    dagId: z.string(),
    agentId: z.string().nullable(),
    limit: z.string().nullable().describe(`the limit that stopped it: ${USAGE_LIMITS.join(', ')}`),
    limitUsd: usdOrNone,
    spentUsd: usdOrNone.describe('what was spent against the limit when it stopped the attempt'),
    limitTokens: z.number().nullable().describe('for task.max_tokens: the limit in tokens (in + out); null otherwise'),
    spentTokens: z.number().nullable().describe('for task.max_tokens: the tokens spent when it stopped the attempt'),
  })).describe(`attempts a spend limit stopped (failed budget_exceeded) in those days, newest first (at most ${COSTS_DEFAULTS.stops})`),
  models: z.array(z.object({
    model: z.string().describe('as the reports named it (agent-provided text); \'\' for reports that named none'),
    costUsd: usd.describe('the reports of known cost; those of unknown cost are counted in unpricedReports, not here'),
    tokensIn: z.number(),
    tokensOut: z.number(),
    reports: z.number(),
    unpricedReports: z.number().describe('reports whose cost the reporter did not know (it had no price for the model)'),
  })).describe('usage reported while attempts ran, by model, from the ledger (the tasks retention kept)'),
});
export type CostsAnswer = z.infer<typeof costsAnswerSchema>;
