import { z } from 'zod';
import { modelPauseSchema } from './fleet.js';
import { instant } from './instant.js';

/** What the rate-limit routes answer (src/http/routes/rate-limits.ts), as sent (engine/ops/rate-limits.ts). */

/** A declared limit with what its current window holds. */
export const rateLimitViewSchema = z.object({
  key: z.string().describe('a model (openai/gpt-4o) or a provider (openai)'),
  requests: z.number().nullable(),
  tokens: z.number().nullable(),
  windowSec: z.number(),
  defaultTokens: z.number(),
  requestsUsed: z.number(),
  tokensUsed: z.number(),
  updatedAt: instant,
});
export type RateLimitView = z.infer<typeof rateLimitViewSchema>;

export const rateLimitListAnswerSchema = z.object({
  rateLimits: z.array(rateLimitViewSchema),
  paused: z.array(modelPauseSchema.extend({ taskId: z.string().nullable().describe('the task whose attempt hit the limit') })).describe('the models or providers a provider\'s 429 paused now'),
});
export type RateLimitListAnswer = z.infer<typeof rateLimitListAnswerSchema>;

export const rateLimitRemoveAnswerSchema = z.object({ key: z.string(), removed: z.literal(true) });
