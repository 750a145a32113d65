import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { usageBudget, usageLateCharge, usageReport } from '../../engine/attempt/usage.js';
import { DagentError } from '../../errors.js';
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
    method: 'POST', url: '/api/tasks/:id/usage', access: 'agent', tenants: { task: ['id'] }, tag: 'agent protocol',
    body: z.strictObject({ fence, ...usageReportBodyFields }),
    summary: 'Report usage while the attempt runs (charged at once, once per report_id); the answer says what is left, or that a limit stopped the attempt; 409 if the lease was lost',
    response: usageAnswerSchema,
  }, async ({ params, body, principal }) => {
    const ref = { taskId: params.id!, fence: body.fence };
    const input = {
      reportKey: body.report_id, costUsd: body.cost_usd, tokensIn: body.tokens_in, tokensOut: body.tokens_out,
      cachedReadTokens: body.cached_read_tokens, cacheWriteTokens: body.cache_write_tokens, model: body.model, tokenId: principal?.tokenId ?? null,
    };
    const agentId = principal?.role === 'agent' ? principal.agentId : null;
    try {
      await holding(d, principal, params.id!, body.fence, body.model);
    } catch (err) {
      // No longer held (the reaper took it back, or a limit stopped it): what the agent paid for is charged late all the same.
      throw agentId && err instanceof DagentError ? await usageLateCharge(d.db, ref, input, agentId, err) : err;
    }
    return usageReport(d.db, ref, input, { log: d.log, agentId });
  });

  route(app, {
    method: 'GET', url: '/api/tasks/:id/budget', access: 'agent', tenants: { task: ['id'] }, tag: 'agent protocol',
    query: z.object({ fence: z.coerce.number().int().min(0).max(2_147_483_647).describe('the fence of your hold on the task') }),
    summary: 'Where the attempt stands against its limits, before a call: what is left (remainingUsd: does a call of your estimate fit?) and whether it is low; 409 if the lease was lost',
    response: budgetAnswerSchema,
  }, async ({ params, query, principal }) => {
    await holding(d, principal, params.id!, query.fence);
    return usageBudget(d.db, { taskId: params.id!, fence: query.fence }, { tokenId: principal?.tokenId ?? null });
  });
}
