import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { approvalList, taskApprove, taskReject } from '../../engine/waits/approvals.js';
import { approveFields, rejectFields } from '../../wire/operator.js';
import { approvalDecisionAnswerSchema, approvalListAnswerSchema } from '../../wire/approvals.js';
import { actor, route } from '../route.js';
import type { HttpDeps } from '../deps.js';
import { tenantsOf } from '../../auth/tenant-reach.js';

/** Approval steps waiting for a person: the list (read), approve and reject (admin tokens: never an agent's). */
export function approvalRoutes(app: FastifyInstance, d: HttpDeps): void {
  const tag = 'approvals';
  route(app, {
    method: 'GET', url: '/api/approvals', access: 'read', tenants: 'filtered', tag,
    query: z.object({ dag_id: z.string().max(64).optional(), limit: z.coerce.number().int().min(1).max(1000).optional() }),
    summary: 'Approval steps waiting for a person, oldest first, with the output each would approve', response: approvalListAnswerSchema,
  }, async ({ query, principal }) => ({ approvals: await approvalList(d.db, { dagId: query.dag_id, limit: query.limit, tenants: tenantsOf(principal) }) }));

  route(app, {
    method: 'POST', url: '/api/tasks/:id/approve', access: 'admin', tenants: { task: ['id'] }, tag,
    body: z.strictObject(approveFields).optional(),
    summary: 'Approve the output waiting on a task\'s approval step; the task moves on to its next step, or completes; 409 when no approval waits on the task',
    response: approvalDecisionAnswerSchema,
  }, async ({ params, body, principal }) => taskApprove(d.db, params.id!, { by: actor(principal), comment: body?.comment, output: body?.output }, { log: d.log }));

  route(app, {
    method: 'POST', url: '/api/tasks/:id/reject', access: 'admin', tenants: { task: ['id'] }, tag,
    body: z.strictObject(rejectFields),
    summary: 'Reject the output waiting on a task\'s approval step: the attempt fails with the comment, and the retry policy decides; 409 when no approval waits on the task',
    response: approvalDecisionAnswerSchema,
  }, async ({ params, body, principal }) => taskReject(d.db, params.id!, { by: actor(principal), comment: body.comment }, { log: d.log }));
}
