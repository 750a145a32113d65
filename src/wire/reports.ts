import { z } from 'zod';
import { LIMITS } from '../config/index.js';
import { modelNameSchema } from '../llm-models.js';
import { LOG_LEVELS } from '../engine/read/attempt-logs.js';
import type { AttemptSpend } from '../db/rows.js';
import { instantOrEpochMsInput } from './instant.js';

/**
 * The fields of an agent's reports, one definition for every way an agent speaks: the HTTP API's bodies
 * (src/http/routes/agent-protocol.ts) and the MCP tools' arguments (src/mcp/agent-tools.ts), with the limits
 * each report is held to. Names are the wire's (snake_case).
 */

/** What an attempt spent, reported with its outcome. */
export const reportSpend = {
  cost_usd: z.number().min(0).max(LIMITS.reportCostUsd).optional().describe('USD this attempt spent so far'),
  tokens_in: z.number().int().min(0).max(LIMITS.reportTokens).optional(),
  tokens_out: z.number().int().min(0).max(LIMITS.reportTokens).optional(),
  model: modelNameSchema.nullable().optional().describe('the model the attempt used: one the task accepts and the agent registered (or, for a task that names none, one the agent registered)'),
};

/** A report's spend fields (reportSpend) as the engine takes them. */
export function spendOfReport(r: { cost_usd?: number; tokens_in?: number; tokens_out?: number; model?: string | null }): AttemptSpend {
  return { costUsd: r.cost_usd, tokensIn: r.tokens_in, tokensOut: r.tokens_out, model: r.model };
}

export const reportFailure = {
  error_class: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, { error: 'lowercase letters, digits and _' })
    .describe('why it failed: timeout, rate_limit, invalid_output, auth_failure, crash, or a class of your own; the DAG\'s retry policy decides by it'),
  message: z.string().max(10_000).describe('what went wrong, for the retry (it reads it) and for a person'),
  retryable: z.boolean().optional().describe('false: no retry will help; the task goes to the dead-letter queue now'),
};

export const reportLogLine = z.strictObject({
  level: z.enum(LOG_LEVELS).optional().describe('default info'),
  message: z.string().max(1_000_000).describe(`kept up to ${LIMITS.logLineChars} characters (DAGENT_LIMIT_LOG_LINE_CHARS); longer is cut and says so`),
  fields: z.record(z.string(), z.unknown()).optional().describe('structured fields, as JSON'),
  at: instantOrEpochMsInput.optional().describe('when it was logged (ISO 8601 with offset, or ms since the epoch); kept between the claim and now'),
});

export const reportProgress = {
  progress: z.number().min(0).max(1).optional().describe('how far along, 0–1'),
  message: z.string().max(2000).optional().describe('what it is doing now'),
};
