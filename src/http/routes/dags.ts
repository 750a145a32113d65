import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { dagSourceLoad } from '../../dag/load.js';
import { DAG_STATES } from '../../model/state-machine.js';
import { dagCancel } from '../../engine/dag/cancel.js';
import { dagBudgetSet } from '../../engine/dag/dag-status.js';
import { dagRerunFailed } from '../../engine/dag/rerun.js';
import { dagRerunChanged } from '../../engine/dag/rerun-changed.js';
import { dagCompare } from '../../engine/read/compare.js';
import { COMPARE_DEFAULTS, tenantIdSchema } from '../../config/index.js';
import { modelNameSchema } from '../../llm-models.js';
import { dagCompareAnswerSchema } from '../../wire/compare.js';
import { dagGraph, dagList } from '../../engine/read/inspect.js';
import { dagTimeline } from '../../engine/read/timeline.js';
import { dagSubmitOrSchedule } from '../../engine/ops/submit-or-schedule.js';
import { priorityOverride } from '../../engine/ops/priority.js';
import { InvalidInputError } from '../../errors.js';
import { listLimit, listQuery, paramValue, priorityFields, resolutionNote } from '../../wire/operator.js';
import {
  dagBudgetAnswerSchema, dagCancelAnswerSchema, dagGraphAnswerSchema, dagListAnswerSchema, dagRerunChangedAnswerSchema, dagSubmitAnswerSchema,
  dagTimelineAnswerSchema,
} from '../../wire/dags.js';
import { priorityAnswerSchema, rerunAnswerSchema } from '../../wire/tasks.js';
import { actor, route } from '../route.js';
import type { HttpDeps } from '../deps.js';
import { tenantForWrite, tenantsOf } from '../../auth/tenant-reach.js';

const note = resolutionNote.optional();

const dagSubmitBody = z.union([
  z.string().min(1).describe('the DAG file as YAML text (Content-Type: application/yaml)'),
  z.strictObject({
    yaml: z.string().min(1).optional().describe('the DAG file as YAML text'),
    dag: z.record(z.string(), z.unknown()).optional().describe('the DAG file as a JSON object (same fields as the YAML)'),
    params: z.record(z.string(), paramValue).optional().describe('values for the DAG\'s declared params'),
  }).refine((b) => (b.yaml === undefined) !== (b.dag === undefined), { error: 'give exactly one of yaml or dag' }),
]);

/**
 * DAGs: submit, list, one as a graph, its timeline; what an admin does to one (cancel, priority, budget, re-run its failed
 * tasks); a rerun with a change as a new DAG, which a DAG author may make (it submits a DAG), and two runs compared.
 */
export function dagRoutes(app: FastifyInstance, d: HttpDeps): void {
  const tag = 'dags';
  route(app, {
    method: 'POST', url: '/api/dags', access: 'submit', tenants: 'filtered', tag, body: dagSubmitBody, bodyTypes: ['application/yaml'],
    query: z.object({
      param: z.union([z.string(), z.array(z.string())]).optional().describe('NAME=VALUE, repeatable (with a YAML body)'),
      force: z.enum(['true', 'false']).optional().describe('true: accept a DAG whose llm-judge steps no active judge can serve now (each result then carries warnings)'),
      tenant: tenantIdSchema.optional().describe('the tenant the DAG (or its schedule) belongs to; default the default tenant; it must exist'),
    }),
    summary: 'Submit a DAG (YAML or JSON) in one transaction; refused with 429 and Retry-After while the queue is full, and with 400 naming each llm-judge step no active judge can serve (unless force=true)',
    response: dagSubmitAnswerSchema,
    successStatuses: { 201: 'a DAG was created', 200: 'nothing new: the DAG existed already (its idempotency key), or the file registered its schedule' },
  }, async ({ body, query, principal, reply }) => {
    const source = typeof body === 'string' ? body : body.yaml ?? JSON.stringify(body.dag, null, 2);
    const given: Array<[string, string]> = [];
    for (const p of [query.param ?? []].flat()) {
      const i = p.indexOf('=');
      if (i <= 0) throw new InvalidInputError(`query.param ${p}: expected NAME=VALUE`);
      given.push([p.slice(0, i), p.slice(i + 1)]);
    }
    if (typeof body !== 'string') for (const [k, v] of Object.entries(body.params ?? {})) given.push([k, Array.isArray(v) ? JSON.stringify(v) : String(v)]);
    // Own properties whatever the names: a param called toString or __proto__ is refused by the loader, not lost here.
    const params = Object.fromEntries(given);
    const file = typeof body !== 'string' && body.dag ? 'request.json' : 'request.yaml';
    // Relative paths in the DAG (schema_file, a test step's cwd) start at the server's working directory.
    const spec = await dagSourceLoad(source, file, { params, baseDir: path.resolve('.'), roots: d.fileRoots });
    const results = await dagSubmitOrSchedule(d.db, [spec], {
      createdBy: actor(principal), log: d.log, maxQueued: d.maxQueued, sourceOf: () => source, replaceAnySchedule: principal?.role === 'admin' || !principal,
      force: query.force === 'true', tenant: tenantForWrite(principal, query.tenant),
    });
    reply.status(results.some((r) => 'created' in r && r.created) ? 201 : 200);
    return { results };
  });

  route(app, {
    method: 'GET', url: '/api/dags', access: 'read', tenants: 'filtered', tag,
    query: z.object({
      status: z.enum(DAG_STATES).optional(), ...listQuery, tag: z.string().min(1).max(64).optional().describe('a tag one of its tasks carries'),
      tenant: tenantIdSchema.optional().describe('only this tenant\'s DAGs'), limit: listLimit,
    }),
    summary: 'DAGs, newest first, with task counts by status, a page at a time (pass `next` as `cursor` for the page after); filters: status, q (the id, or part of the name or title), tag, tenant, from/to (created)',
    response: dagListAnswerSchema,
  }, ({ query, principal }) => dagList(d.db, { ...query, tenants: tenantsOf(principal) }));

  route(app, {
    method: 'GET', url: '/api/dags/:id', access: 'read', tenants: { dag: ['id'] }, tag,
    summary: 'One DAG as a graph: tasks with status and depth, edges, critical path, open dead letters',
    response: dagGraphAnswerSchema,
  }, ({ params }) => dagGraph(d.db, params.id!));

  route(app, {
    method: 'GET', url: '/api/dags/:id/timeline', access: 'read', tenants: { dag: ['id'] }, tag,
    summary: 'A DAG\'s attempts as a Gantt chart: per task, queued, running (by outcome), validating and retry-wait stretches; the critical path as it happened; cost per model',
    response: dagTimelineAnswerSchema,
  }, ({ params }) => dagTimeline(d.db, params.id!));

  route(app, {
    method: 'POST', url: '/api/dags/:id/cancel', access: 'admin', tenants: { dag: ['id'] }, tag, body: z.strictObject({ note }).optional(),
    summary: 'Cancel every unfinished task of the DAG', response: dagCancelAnswerSchema,
  }, async ({ params, body, principal }) => ({ cancelled: (await dagCancel(d.db, params.id!, actor(principal), body?.note)).length }));

  route(app, {
    method: 'POST', url: '/api/dags/:id/priority', access: 'admin', tenants: { dag: ['id'] }, tag, body: z.strictObject(priorityFields),
    summary: 'Override the base priority of every unfinished task of a DAG', response: priorityAnswerSchema,
  }, ({ params, body, principal }) => priorityOverride(d.db, params.id!, body.priority, actor(principal)));

  route(app, {
    method: 'POST', url: '/api/dags/:id/budget', access: 'admin', tenants: { dag: ['id'] }, tag,
    body: z.strictObject({ usd: z.number().min(0).max(100_000_000).describe('the DAG\'s new budget in USD') }),
    summary: 'Set a running or blocked DAG\'s budget: one blocked on its budget resumes once it can pay for its next task; 409 for a completed or cancelled DAG',
    response: dagBudgetAnswerSchema,
  }, ({ params, body, principal }) => dagBudgetSet(d.db, params.id!, body.usd, { by: actor(principal), log: d.log }));

  route(app, {
    method: 'POST', url: '/api/dags/:id/rerun', access: 'admin', tenants: { dag: ['id'] }, tag,
    body: z.strictObject({ from_failed: z.literal(true).describe('run the dead-lettered and cancelled tasks again'), note }),
    summary: 'Run a DAG\'s dead-lettered and cancelled tasks again; a cancelled or blocked DAG runs on',
    response: rerunAnswerSchema,
  }, async ({ params, body, principal }) => dagRerunFailed(d.db, params.id!, { by: actor(principal), note: body.note }));

  route(app, {
    method: 'POST', url: '/api/dags/:id/reruns', access: 'submit', tenants: { dag: ['id'] }, tag,
    body: z.strictObject({
      model: modelNameSchema.optional().describe('run every LLM task (one that names a model or requires capability llm) on this model only'),
      set: z.record(z.string().max(300), z.unknown()).optional()
        .describe('spec fields to set, by path: FIELD for every LLM task, TASK.FIELD for one task; FIELD is prompt, models, fallback_models, input, input.NAME or constraints.NAME, each value checked as the DAG file\'s field'),
      note,
      force: z.boolean().optional().describe('true: accept a rerun whose llm-judge steps no active judge can serve now (the answer then carries warnings)'),
    }),
    summary: 'Re-run a finished DAG with a change (a model, spec fields) as a new DAG, in one transaction: tasks whose spec is unchanged and none of whose upstream tasks run again are carried over with their output, at no cost; 409 for a DAG not finished, 400 for a change that changes nothing',
    response: dagRerunChangedAnswerSchema,
    successStatuses: { 201: 'the new DAG was created' },
  }, async ({ params, body, principal, reply }) => {
    const r = await dagRerunChanged(d.db, params.id!, { model: body.model, set: body.set }, {
      by: actor(principal), note: body.note, force: body.force, maxQueued: d.maxQueued, log: d.log,
    });
    reply.status(201);
    return r;
  });

  route(app, {
    method: 'GET', url: '/api/dags/:id/compare/:other', access: 'read', tenants: { dag: ['id', 'other'] }, tag,
    query: z.object({
      output_chars: z.coerce.number().int().min(0).max(COMPARE_DEFAULTS.outputCharsMax).optional()
        .describe(`cut each output's text to this many characters (default ${COMPARE_DEFAULTS.outputChars}); a task's whole output is GET /api/tasks/:id`),
    }),
    summary: 'Two runs of a DAG side by side (a DAG and its rerun with a change): per task key, each one\'s output, validation verdicts, cost, tokens, time and attempts, and their totals',
    response: dagCompareAnswerSchema,
  }, ({ params, query }) => dagCompare(d.db, params.id!, params.other!, { outputChars: query.output_chars ?? COMPARE_DEFAULTS.outputChars }));
}
