import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { usageBudget, usageReport } from '../../engine/attempt/usage.js';
import { budgetAnswerSchema, usageAnswerSchema, usageReportBodyFields } from '../../wire/usage.js';
import { fence, holding } from '../task-holder.js';
import { route } from '../route.js';
import type { HttpDeps } from '../deps.js';

/**
 * Usage reported while an attempt runs (engine/attempt/usage.ts): written and charged at once, held to the attempt's
 * limits; the same as ctx.reportCost. A report past a limit is charged and stops the attempt; the answer says so.
 */
export function usageRoutes(app: FastifyInstance, d: HttpDeps): void {
  route(app, {
    method: 'POST', url: '/api/tasks/:id/usage', access: 'agent', tag: 'agent protocol',
    body: z.strictObject({ fence, ...usageReportBodyFields }),
    summary: 'Report usage while the attempt runs (charged at once, once per report_id); the answer says what is left, or that a limit stopped the attempt; 409 if the lease was lost',
    response: usageAnswerSchema,
  }, async ({ params, body, principal }) => {
    await holding(d, principal, params.id!, body.fence, body.model);
    return usageReport(d.db, { taskId: params.id!, fence: body.fence }, {
      reportKey: body.report_id, costUsd: body.cost_usd, tokensIn: body.tokens_in, tokensOut: body.tokens_out,
      cachedReadTokens: body.cached_read_tokens, cacheWriteTokens: body.cache_write_tokens, model: body.model, tokenId: principal?.tokenId ?? null,
    }, { log: d.log });
  });

  route(app, {
    method: 'GET', url: '/api/tasks/:id/budget', access: 'agent', tag: 'agent protocol',
    query: z.object({ fence: z.coerce.number().int().min(0).max(2_147_483_647).describe('the fence of your hold on the task') }),
    summary: 'Where the attempt stands against its limits, before a call: what is left (remainingUsd: does a call of your estimate fit?) and whether it is low; 409 if the lease was lost',
    response: budgetAnswerSchema,
  }, async ({ params, query, principal }) => {
    await holding(d, principal, params.id!, query.fence);
    return usageBudget(d.db, { taskId: params.id!, fence: query.fence }, { tokenId: principal?.tokenId ?? null });
  });
}
