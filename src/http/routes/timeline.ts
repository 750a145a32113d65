import type { FastifyInstance } from 'fastify';
import { dagTimeline } from '../../engine/read/timeline.js';
import { route } from '../route.js';
import type { HttpDeps } from '../deps.js';

/** A DAG's timeline: what the dashboard's Gantt chart and cost tables draw. */
export function timelineRoutes(app: FastifyInstance, d: HttpDeps): void {
  route(app, {
    method: 'GET', url: '/api/dags/:id/timeline', access: 'read', tag: 'humans',
    summary: 'A DAG\'s attempts as a Gantt chart: per task, queued, running (by outcome), validating and retry-wait stretches; the critical path as it happened; cost per model',
    responds: '{dagId, from, to, tasks: [{id, key, type, status, parentKey, costUsd, critical, segments: [{kind, from, to, attempt?, outcome?, model?}]}], criticalPath, costByModel: [{model, costUsd, tokensIn, tokensOut, attempts}]}',
  }, ({ params }) => dagTimeline(d.db, params.id!));
}
