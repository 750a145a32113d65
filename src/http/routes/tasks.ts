import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { TASK_STATES } from '../../model/state-machine.js';
import { taskCancel } from '../../engine/dag/cancel.js';
import { taskRerun } from '../../engine/dag/rerun.js';
import { attemptLogsGet } from '../../engine/read/attempt-logs.js';
import { taskListFiltered, taskShow } from '../../engine/read/inspect.js';
import { priorityOverride } from '../../engine/ops/priority.js';
import { LIMITS } from '../../config/index.js';
import { listLimit, priorityFields, resolutionNote } from '../../wire/operator.js';
import {
  priorityAnswerSchema, rerunAnswerSchema, taskCancelAnswerSchema, taskListAnswerSchema, taskLogAnswerSchema, taskShowAnswerSchema,
} from '../../wire/tasks.js';
import { actor, route } from '../route.js';
import type { HttpDeps } from '../deps.js';
import { tenantsOf } from '../../auth/tenant-reach.js';

const note = resolutionNote.optional();

/** Tasks: the list, one in full, its log; what an admin does to one (cancel, priority, run again). */
export function taskRoutes(app: FastifyInstance, d: HttpDeps): void {
  const tag = 'tasks';
  route(app, {
    method: 'GET', url: '/api/tasks', access: 'read', tenants: 'filtered', tag,
    query: z.object({ dag_id: z.string().optional(), status: z.enum(TASK_STATES).optional(), limit: listLimit }),
    summary: 'Tasks, filtered by DAG and status', response: taskListAnswerSchema,
  }, async ({ query, principal }) => ({ tasks: await taskListFiltered(d.db, { dagId: query.dag_id, status: query.status, limit: query.limit, tenants: tenantsOf(principal) }) }));

  route(app, {
    method: 'GET', url: '/api/tasks/:id', access: 'read', tenants: { task: ['id'] }, tag,
    summary: 'One task: spec, resolved inputs, output, attempts (with validation verdicts) and events',
    response: taskShowAnswerSchema,
  }, ({ params }) => taskShow(d.db, params.id!));

  route(app, {
    method: 'GET', url: '/api/tasks/:id/logs', access: 'read', tenants: { task: ['id'] }, tag,
    query: z.object({
      attempt: z.coerce.number().int().min(1).max(1000).optional().describe('the attempt number; default the latest that logged'),
      after: z.coerce.number().int().min(0).optional().describe('only lines after this id (the `next` of the previous page): to follow a running attempt'),
      limit: z.coerce.number().int().min(1).max(LIMITS.logLinesPerAttempt).optional(),
    }),
    summary: 'A task\'s log: one attempt\'s lines (the latest by default), with every attempt\'s counts and how many lines were dropped',
    response: taskLogAnswerSchema,
  }, ({ params, query }) => attemptLogsGet(d.db, params.id!, { attempt: query.attempt, after: query.after, limit: query.limit }));

  route(app, {
    method: 'POST', url: '/api/tasks/:id/cancel', access: 'admin', tenants: { task: ['id'] }, tag, body: z.strictObject({ note }).optional(),
    summary: 'Cancel a task and everything downstream that can no longer run', response: taskCancelAnswerSchema,
  }, async ({ params, body, principal }) => ({
    cancelled: (await taskCancel(d.db, params.id!, actor(principal), body?.note)).map((c) => ({ id: c.id, key: c.key, previous: c.previous })),
  }));

  route(app, {
    method: 'POST', url: '/api/tasks/:id/priority', access: 'admin', tenants: { task: ['id'] }, tag, body: z.strictObject(priorityFields),
    summary: 'Override a task\'s base priority', response: priorityAnswerSchema,
  }, ({ params, body, principal }) => priorityOverride(d.db, params.id!, body.priority, actor(principal)));

  route(app, {
    method: 'POST', url: '/api/tasks/:id/rerun', access: 'admin', tenants: { task: ['id'] }, tag,
    body: z.strictObject({
      downstream: z.boolean().optional().describe('everything downstream of it too'), note,
      fromStep: z.string().min(1).max(200).optional().describe('keep the durable steps the task recorded before this one (it replays them); the rest go'),
    }).optional(),
    summary: 'Run a completed, dead-lettered or cancelled task again (a fresh attempt budget; its history is kept, its durable steps deleted unless fromStep keeps those before it); 409 when a task downstream is held by an agent now',
    response: rerunAnswerSchema,
  }, async ({ params, body, principal }) => taskRerun(d.db, params.id!, { downstream: body?.downstream, by: actor(principal), note: body?.note, fromStep: body?.fromStep }));
}
