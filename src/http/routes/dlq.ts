import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { dlqBulk, dlqCancel, dlqEditRetry, dlqPage, dlqRetry, dlqShow, taskEditSchema } from '../../engine/ops/dlq.js';
import { dlqCancelFields, dlqRetryFields, listLimit, listQuery, resolutionNote } from '../../wire/operator.js';
import { dlqBulkAnswerSchema, dlqEntryAnswerSchema, dlqPageAnswerSchema, dlqShowAnswerSchema } from '../../wire/dlq.js';
import { actor, route } from '../route.js';
import type { HttpDeps } from '../deps.js';
import { tenantsOf } from '../../auth/tenant-reach.js';

/** The fields that select dead letters, for the list and for the bulk actions alike. */
const dlqFilterQuery = {
  dag_id: z.string().max(64).optional(), type: z.string().max(200).optional(), error_class: z.string().max(64).optional(), agent_id: z.string().max(128).optional(),
};

/** The dead-letter queue: entries (read), and what an admin does with them: retry, edit and retry, cancel, one at a time or in bulk. */
export function dlqRoutes(app: FastifyInstance, d: HttpDeps): void {
  const tag = 'dead letters';
  const note = resolutionNote.optional();
  route(app, {
    method: 'GET', url: '/api/dlq', access: 'read', tenants: 'filtered', tag,
    query: z.object({ all: z.enum(['true', 'false']).optional().describe('include resolved entries'), ...dlqFilterQuery, ...listQuery, limit: listLimit }),
    summary: 'Dead-letter entries (open ones unless all=true), newest first, a page at a time (pass `next` as `cursor`); filters: dag_id, type, error_class, agent_id, q (the id, or part of the task key or reason), from/to',
    response: dlqPageAnswerSchema,
  }, ({ query, principal }) => dlqPage(d.db, {
    all: query.all === 'true', tenants: tenantsOf(principal), dagId: query.dag_id, type: query.type, errorClass: query.error_class, agentId: query.agent_id,
    q: query.q, from: query.from, to: query.to, cursor: query.cursor, limit: query.limit,
  }));

  route(app, {
    method: 'GET', url: '/api/dlq/:id', access: 'read', tenants: { deadLetter: ['id'] }, tag,
    summary: 'One dead-letter entry with its task and full failure history', response: dlqShowAnswerSchema,
  }, ({ params }) => dlqShow(d.db, params.id!));

  route(app, {
    method: 'POST', url: '/api/dlq/:id/retry', access: 'admin', tenants: { deadLetter: ['id'] }, tag, body: z.strictObject(dlqRetryFields).optional(),
    summary: 'Retry a dead-lettered task (back to READY)', response: dlqEntryAnswerSchema,
  }, async ({ params, body, principal }) => ({ entry: await dlqRetry(d.db, params.id!, { by: actor(principal), note: body?.note, resetAttempts: body?.reset_attempts }) }));

  route(app, {
    method: 'POST', url: '/api/dlq/:id/cancel', access: 'admin', tenants: { deadLetter: ['id'] }, tag, body: z.strictObject(dlqCancelFields).optional(),
    summary: 'Cancel a dead-lettered task (and its dependents), with a note', response: dlqEntryAnswerSchema,
  }, async ({ params, body, principal }) => ({ entry: await dlqCancel(d.db, params.id!, { by: actor(principal), note: body?.note }) }));

  route(app, {
    method: 'POST', url: '/api/dlq/:id/edit-retry', access: 'admin', tenants: { deadLetter: ['id'] }, tag,
    body: z.strictObject({ edit: taskEditSchema, note, reset_attempts: z.boolean().optional() }),
    summary: 'Edit the task\'s spec, then retry it, in one transaction', response: dlqEntryAnswerSchema,
  }, async ({ params, body, principal }) => ({
    entry: await dlqEditRetry(d.db, params.id!, body.edit, { by: actor(principal), note: body.note, resetAttempts: body.reset_attempts }),
  }));

  route(app, {
    method: 'POST', url: '/api/dlq/bulk', access: 'admin', tenants: 'filtered', tag,
    body: z.strictObject({
      action: z.enum(['retry', 'cancel']),
      filter: z.strictObject({ ...dlqFilterQuery, q: listQuery.q, from: listQuery.from, to: listQuery.to }),
      note, reset_attempts: z.boolean().optional(),
    }),
    summary: 'Retry or cancel every open entry matching the filter (the list\'s: DAG, task type, error class, agent, search, date range), up to 1000, in one transaction',
    response: dlqBulkAnswerSchema,
  }, ({ body, principal }) => dlqBulk(d.db, {
    dagId: body.filter.dag_id, type: body.filter.type, errorClass: body.filter.error_class, agentId: body.filter.agent_id,
    q: body.filter.q, from: body.filter.from, to: body.filter.to, tenants: tenantsOf(principal),
  }, body.action, { by: actor(principal), note: body.note, resetAttempts: body.reset_attempts }));
}
