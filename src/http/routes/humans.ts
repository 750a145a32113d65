import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { dagSourceLoad } from '../../dag/load.js';
import { agentList } from '../../engine/ops/agents.js';
import { DAG_STATES, TASK_STATES } from '../../model/state-machine.js';
import { dagCancel, taskCancel } from '../../engine/dag/cancel.js';
import { dagBudgetSet } from '../../engine/dag/dag-status.js';
import { dlqBulk, dlqCancel, dlqEditRetry, dlqPage, dlqRetry, dlqShow, taskEditSchema } from '../../engine/ops/dlq.js';
import { dagGraph, dagList, statsGet, taskListFiltered, taskShow } from '../../engine/read/inspect.js';
import { dagSubmitOrSchedule } from '../../engine/ops/submit-or-schedule.js';
import { priorityOverride } from '../../engine/ops/priority.js';
import { InvalidInputError } from '../../errors.js';
import { dlqCancelFields, dlqRetryFields, paramValue, resolutionNote } from '../../wire/operator.js';
import { actor, route } from '../route.js';
import type { HttpDeps } from '../deps.js';
import path from 'node:path';

const note = resolutionNote.optional();
const limit = z.coerce.number().int().min(1).max(1000).optional();
/** The fields that select dead letters, for the list and for the bulk actions alike. */
const dlqFilterQuery = {
  dag_id: z.string().max(64).optional(), type: z.string().max(200).optional(), error_class: z.string().max(64).optional(), agent_id: z.string().max(128).optional(),
};
/** What the long lists (DAGs, dead letters) are searched and paged by. */
const listQuery = {
  q: z.string().min(1).max(200).optional().describe('search: an id, or part of a name (DAGs: name or title; dead letters: task key or reason), any case'),
  from: z.iso.datetime({ offset: true }).optional().describe('created at or after this instant (ISO 8601 with offset)'),
  to: z.iso.datetime({ offset: true }).optional().describe('created before this instant'),
  cursor: z.string().max(400).optional().describe('the `next` of the previous page'),
};

const dagSubmitBody = z.union([
  z.string().min(1).describe('the DAG file as YAML text (Content-Type: application/yaml)'),
  z.strictObject({
    yaml: z.string().min(1).optional().describe('the DAG file as YAML text'),
    dag: z.record(z.string(), z.unknown()).optional().describe('the DAG file as a JSON object (same fields as the YAML)'),
    params: z.record(z.string(), paramValue).optional().describe('values for the DAG\'s declared params'),
  }).refine((b) => (b.yaml === undefined) !== (b.dag === undefined), { error: 'give exactly one of yaml or dag' }),
]);


/** The routes humans (admin tokens) use: DAGs, tasks, priorities, the dead-letter queue, agents. */
export function humanRoutes(app: FastifyInstance, d: HttpDeps): void {
  const tag = 'humans';
  route(app, {
    method: 'POST', url: '/api/dags', access: 'submit', tag, body: dagSubmitBody, bodyTypes: ['application/yaml'],
    query: z.object({
      param: z.union([z.string(), z.array(z.string())]).optional().describe('NAME=VALUE, repeatable (with a YAML body)'),
      force: z.enum(['true', 'false']).optional().describe('true: accept a DAG whose llm-judge steps no active judge can serve now (each result then carries warnings)'),
    }),
    summary: 'Submit a DAG (YAML or JSON) in one transaction; refused with 429 and Retry-After while the queue is full',
    responds: '201 {results: [{dagId, name, tasks, created, warnings?} | {schedule, nextFireAt, warnings?}]}; 400 naming each llm-judge step no active judge can serve (unless force=true)',
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
      force: query.force === 'true',
    });
    reply.status(results.some((r) => 'created' in r && r.created) ? 201 : 200);
    return { results };
  });

  route(app, {
    method: 'GET', url: '/api/dags', access: 'read', tag,
    query: z.object({ status: z.enum(DAG_STATES).optional(), ...listQuery, tag: z.string().min(1).max(64).optional().describe('a tag one of its tasks carries'), limit }),
    summary: 'DAGs, newest first, with task counts by status, a page at a time (pass `next` as `cursor` for the page after); filters: status, q (the id, or part of the name or title), tag, from/to (created)',
    responds: '{dags: [...], next: cursor | null}',
  }, ({ query }) => dagList(d.db, query));

  route(app, {
    method: 'GET', url: '/api/dags/:id', access: 'read', tag,
    summary: 'One DAG as a graph: tasks with status and depth, edges, critical path, open dead letters',
    responds: '{dag, nodes, edges, criticalPath, deadLetters}',
  }, ({ params }) => dagGraph(d.db, params.id!));

  route(app, {
    method: 'POST', url: '/api/dags/:id/cancel', access: 'admin', tag, body: z.strictObject({ note }).optional(),
    summary: 'Cancel every unfinished task of the DAG', responds: '{cancelled: n}',
  }, async ({ params, body, principal }) => ({ cancelled: (await dagCancel(d.db, params.id!, actor(principal), body?.note)).length }));

  route(app, {
    method: 'GET', url: '/api/tasks', access: 'read', tag,
    query: z.object({ dag_id: z.string().optional(), status: z.enum(TASK_STATES).optional(), limit }),
    summary: 'Tasks, filtered by DAG and status', responds: '{tasks: [...]}',
  }, async ({ query }) => ({ tasks: await taskListFiltered(d.db, { dagId: query.dag_id, status: query.status, limit: query.limit }) }));

  route(app, {
    method: 'GET', url: '/api/tasks/:id', access: 'read', tag,
    summary: 'One task: spec, resolved inputs, output, attempts (with validation verdicts) and events',
    responds: '{task, inputs, attempts, events}',
  }, ({ params }) => taskShow(d.db, params.id!));

  route(app, {
    method: 'POST', url: '/api/tasks/:id/cancel', access: 'admin', tag, body: z.strictObject({ note }).optional(),
    summary: 'Cancel a task and everything downstream that can no longer run', responds: '{cancelled: [{id, key, previous}]}',
  }, async ({ params, body, principal }) => ({
    cancelled: (await taskCancel(d.db, params.id!, actor(principal), body?.note)).map((c) => ({ id: c.id, key: c.key, previous: c.previous })),
  }));

  const priorityBody = z.strictObject({ priority: z.number().int().min(0).max(100).describe('0 is most urgent') });
  for (const kind of ['tasks', 'dags'] as const) {
    route(app, {
      method: 'POST', url: `/api/${kind}/:id/priority`, access: 'admin', tag, body: priorityBody,
      summary: kind === 'tasks' ? 'Override a task\'s base priority' : 'Override the base priority of every unfinished task of a DAG',
      responds: '{tasks: n}',
    }, ({ params, body, principal }) => priorityOverride(d.db, params.id!, body.priority, actor(principal)));
  }

  route(app, {
    method: 'POST', url: '/api/dags/:id/budget', access: 'admin', tag,
    body: z.strictObject({ usd: z.number().min(0).max(100_000_000).describe('the DAG\'s new budget in USD') }),
    summary: 'Set a running or blocked DAG\'s budget: one blocked on its budget resumes once it can pay for its next task',
    responds: '{dagId, previous, budgetUsd, status, blockedReason}',
  }, ({ params, body, principal }) => dagBudgetSet(d.db, params.id!, body.usd, { by: actor(principal), log: d.log }));

  route(app, {
    method: 'GET', url: '/api/dlq', access: 'read', tag,
    query: z.object({ all: z.enum(['true', 'false']).optional().describe('include resolved entries'), ...dlqFilterQuery, ...listQuery, limit }),
    summary: 'Dead-letter entries (open ones unless all=true), newest first, a page at a time (pass `next` as `cursor`); filters: dag_id, type, error_class, agent_id, q (the id, or part of the task key or reason), from/to',
    responds: '{entries: [...], next: cursor | null}',
  }, ({ query }) => dlqPage(d.db, {
    all: query.all === 'true', dagId: query.dag_id, type: query.type, errorClass: query.error_class, agentId: query.agent_id,
    q: query.q, from: query.from, to: query.to, cursor: query.cursor, limit: query.limit,
  }));

  route(app, {
    method: 'GET', url: '/api/dlq/:id', access: 'read', tag,
    summary: 'One dead-letter entry with its task and full failure history', responds: '{entry, task}',
  }, ({ params }) => dlqShow(d.db, params.id!));

  const retryBody = z.strictObject(dlqRetryFields).optional();
  route(app, {
    method: 'POST', url: '/api/dlq/:id/retry', access: 'admin', tag, body: retryBody,
    summary: 'Retry a dead-lettered task (back to READY)', responds: '{entry}',
  }, async ({ params, body, principal }) => ({ entry: await dlqRetry(d.db, params.id!, { by: actor(principal), note: body?.note, resetAttempts: body?.reset_attempts }) }));

  route(app, {
    method: 'POST', url: '/api/dlq/:id/cancel', access: 'admin', tag, body: z.strictObject(dlqCancelFields).optional(),
    summary: 'Cancel a dead-lettered task (and its dependents), with a note', responds: '{entry}',
  }, async ({ params, body, principal }) => ({ entry: await dlqCancel(d.db, params.id!, { by: actor(principal), note: body?.note }) }));

  route(app, {
    method: 'POST', url: '/api/dlq/:id/edit-retry', access: 'admin', tag,
    body: z.strictObject({ edit: taskEditSchema, note, reset_attempts: z.boolean().optional() }),
    summary: 'Edit the task\'s spec, then retry it, in one transaction', responds: '{entry}',
  }, async ({ params, body, principal }) => ({
    entry: await dlqEditRetry(d.db, params.id!, body.edit, { by: actor(principal), note: body.note, resetAttempts: body.reset_attempts }),
  }));

  route(app, {
    method: 'POST', url: '/api/dlq/bulk', access: 'admin', tag,
    body: z.strictObject({
      action: z.enum(['retry', 'cancel']),
      filter: z.strictObject({ ...dlqFilterQuery, q: listQuery.q, from: listQuery.from, to: listQuery.to }),
      note, reset_attempts: z.boolean().optional(),
    }),
    summary: 'Retry or cancel every open entry matching the filter (the list\'s: DAG, task type, error class, agent, search, date range), up to 1000, in one transaction',
    responds: '{action, ids}',
  }, ({ body, principal }) => dlqBulk(d.db, {
    dagId: body.filter.dag_id, type: body.filter.type, errorClass: body.filter.error_class, agentId: body.filter.agent_id,
    q: body.filter.q, from: body.filter.from, to: body.filter.to,
  }, body.action, { by: actor(principal), note: body.note, resetAttempts: body.reset_attempts }));

  route(app, {
    method: 'GET', url: '/api/agents', access: 'read', tag,
    summary: 'Registered agents: capabilities, budgets, spend and heartbeats', responds: '{agents: [...]}',
  }, async () => ({ agents: await agentList(d.db) }));

  route(app, {
    method: 'GET', url: '/api/stats', access: 'read', tag,
    summary: 'Queue health: task counts by status and priority tier, oldest READY age, agents, which node runs each maintenance loop', responds: '{counts, oldestReadyAgeSec, pausedModels, agents, loops}',
  }, () => statsGet(d.db));
}
