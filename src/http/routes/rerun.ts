import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { dagRerunFailed, taskRerun } from '../../engine/dag/rerun.js';
import { actor, route } from '../route.js';
import type { HttpDeps } from '../deps.js';

const note = z.string().max(2000).optional();

/** Running finished work again (admin tokens): a task, optionally with everything downstream; a DAG's failed tasks. */
export function rerunRoutes(app: FastifyInstance, d: HttpDeps): void {
  const tag = 'humans';
  route(app, {
    method: 'POST', url: '/api/tasks/:id/rerun', access: 'admin', tag,
    body: z.strictObject({ downstream: z.boolean().optional().describe('everything downstream of it too'), note }).optional(),
    summary: 'Run a completed, dead-lettered or cancelled task again (a fresh attempt budget; its history is kept)',
    responds: '{dagId, reopened: [{id, key, previous}]}; 409 when a task downstream is held by an agent now',
  }, async ({ params, body, principal }) => taskRerun(d.db, params.id!, { downstream: body?.downstream, by: actor(principal), note: body?.note }));

  route(app, {
    method: 'POST', url: '/api/dags/:id/rerun', access: 'admin', tag,
    body: z.strictObject({ from_failed: z.literal(true).describe('run the dead-lettered and cancelled tasks again'), note }),
    summary: 'Run a DAG\'s dead-lettered and cancelled tasks again; a cancelled or blocked DAG runs on',
    responds: '{dagId, reopened: [{id, key, previous}]}',
  }, async ({ params, body, principal }) => dagRerunFailed(d.db, params.id!, { by: actor(principal), note: body.note }));
}
