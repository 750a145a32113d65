import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { attemptLogAppend, attemptLogsGet } from '../../engine/read/attempt-logs.js';
import { reportLogLine } from '../../wire/reports.js';
import { LIMITS } from '../../config/index.js';
import { route } from '../route.js';
import type { HttpDeps } from '../deps.js';
import { fence, holding } from '../task-holder.js';

/** Per-attempt logs: an agent appends to the attempt it holds; a reader reads any task's. */
export function logRoutes(app: FastifyInstance, d: HttpDeps): void {
  route(app, {
    method: 'POST', url: '/api/tasks/:id/logs', access: 'agent', tag: 'agents',
    body: z.strictObject({
      fence,
      lines: z.array(reportLogLine).min(1).max(500),
    }),
    summary: 'Store log lines with the attempt the agent holds (fenced); past the attempt\'s allowance they are counted as dropped; 409 if the lease was lost',
    responds: '{stored, dropped}',
  }, async ({ params, body, principal }) => {
    await holding(d, principal, params.id!, body.fence);
    return attemptLogAppend(d.db, { taskId: params.id!, fence: body.fence }, body.lines);
  });

  route(app, {
    method: 'GET', url: '/api/tasks/:id/logs', access: 'read', tag: 'tasks',
    query: z.object({
      attempt: z.coerce.number().int().min(1).max(1000).optional().describe('the attempt number; default the latest that logged'),
      after: z.coerce.number().int().min(0).optional().describe('only lines after this id (the `next` of the previous page): to follow a running attempt'),
      limit: z.coerce.number().int().min(1).max(LIMITS.logLinesPerAttempt).optional(),
    }),
    summary: 'A task\'s log: one attempt\'s lines (the latest by default), with every attempt\'s counts and how many lines were dropped',
    responds: '{attempts: [{attempt, fence, lines, bytes, dropped}], attempt?: {attempt, fence, lines, bytes, dropped, running, next, entries: [{id, level, message, fields, at}]}}',
  }, ({ params, query }) => attemptLogsGet(d.db, params.id!, { attempt: query.attempt, after: query.after, limit: query.limit }));
}
