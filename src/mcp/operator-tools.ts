import path from 'node:path';
import { ResourceTemplate, type McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { Db } from '../db/handle.js';
import { dagFileLoad, dagSourceLoad } from '../dag/load.js';
import { graphRender } from '../dag/render.js';
import { accessAllows } from '../auth/access.js';
import { tenantForWrite, tenantObjectReach } from '../auth/tenant-reach.js';
import type { TenantOwned } from '../db/queries/tenants.js';
import { taskApprove, taskReject } from '../engine/waits/approvals.js';
import { dlqCancel, dlqList, dlqRetry } from '../engine/ops/dlq.js';
import { dagSubmitOrSchedule } from '../engine/ops/submit-or-schedule.js';
import { dagStatus, taskShow } from '../engine/read/inspect.js';
import type { Principal } from '../auth/tokens.js';
import { projectPathResolve } from '../validation/project-files.js';
import { InvalidInputError } from '../errors.js';
import { approveFields, dlqCancelFields, dlqRetryFields, paramValue, rejectFields } from '../wire/operator.js';
import { toolResult } from './results.js';
import { streamReadsRegister } from './stream-reads.js';

export interface OperatorDeps { db: Db; log?: Logger; fileRoots: readonly string[]; maxQueued?: number }

/** How many of a DAG's tasks dag_status lists (the counts cover them all). */
const STATUS_TASKS_SHOWN = 200;

/**
 * The tools of an operator's session (submit, read and admin tokens), each only where the token's role may do the
 * same over HTTP: submit a DAG, look at DAGs, tasks and dead letters, and (admin) retry or cancel dead letters and
 * decide approvals. Plus resources: a DAG's status and graph, a task in full, a task's stream (stream-reads.ts).
 */
export function operatorToolsRegister(server: McpServer, p: Principal, d: OperatorDeps): void {
  const by = `mcp:${p.role}:${p.tokenId}`;
  const can = (access: 'read' | 'submit' | 'admin') => accessAllows(access, p.role);
  // What the HTTP routes check before their handlers: another tenant's object is one that does not exist.
  const reach = async (kind: TenantOwned, id: string) => { await tenantObjectReach(d.db, p, kind, id); };

  if (can('submit')) {
    server.registerTool('submit_dag', {
      title: 'Submit a DAG',
      description: 'Create a DAG from its YAML (yaml), or from a DAG file of this project (file, relative to the server\'s working directory). Returns the DAG id, or every problem with its line.',
      inputSchema: {
        yaml: z.string().max(1_048_576).optional().describe('the DAG file\'s text'),
        file: z.string().max(1000).optional().describe('a DAG file of the project, such as dags/examples/hello.yaml'),
        params: z.record(z.string(), paramValue).optional().describe('values for the DAG\'s params'),
      },
    }, (a) => toolResult(async () => {
      if ((a.yaml === undefined) === (a.file === undefined)) throw new InvalidInputError('give exactly one of yaml and file');
      const params = Object.fromEntries(Object.entries(a.params ?? {}).map(([k, v]) => [k, Array.isArray(v) ? JSON.stringify(v) : String(v)]));
      const where = { baseDir: path.resolve('.'), roots: d.fileRoots };
      let spec;
      if (a.file !== undefined) {
        const real = await projectPathResolve(a.file, where);
        if ('error' in real) throw new InvalidInputError(`file: ${real.error}`);
        spec = await dagFileLoad(real.real, { params, roots: d.fileRoots });
      } else spec = await dagSourceLoad(a.yaml!, 'request.yaml', { params, ...where });
      const results = await dagSubmitOrSchedule(d.db, [spec], {
        createdBy: by, log: d.log, maxQueued: d.maxQueued, replaceAnySchedule: p.role === 'admin', tenant: tenantForWrite(p, undefined),
      });
      return { results };
    }));
  }

  if (can('read')) {
    server.registerTool('dag_status', {
      title: 'A DAG\'s status',
      description: 'A DAG: its status, counts by task status, its open dead letters, and its tasks (the first 200) with status and attempts.',
      inputSchema: { dag_id: z.string().max(64) },
    }, (a) => toolResult(async () => {
      await reach('dag', a.dag_id);
      const s = await dagStatus(d.db, a.dag_id);
      const counts: Record<string, number> = {};
      for (const t of s.tasks) counts[t.status] = (counts[t.status] ?? 0) + 1;
      return {
        dag: { id: s.dag.id, name: s.dag.name, status: s.dag.status, spentUsd: s.dag.spentUsd, budgetUsd: s.dag.budgetUsd },
        counts, deadLetters: s.deadLetters.map((x) => ({ id: x.id, taskKey: x.taskKey, reason: x.reason })),
        tasks: s.tasks.slice(0, STATUS_TASKS_SHOWN).map((t) => ({ id: t.id, key: t.key, status: t.status, attempts: t.attempts, lastError: t.lastError })),
        ...(s.tasks.length > STATUS_TASKS_SHOWN ? { more: s.tasks.length - STATUS_TASKS_SHOWN } : {}),
      };
    }));
    server.registerTool('task_show', {
      title: 'A task in full',
      description: 'One task: its spec, the inputs it gets, its output, its attempts with their errors, and its events.',
      inputSchema: { task_id: z.string().max(64) },
    }, (a) => toolResult(async () => (await reach('task', a.task_id), taskShow(d.db, a.task_id))));
    server.registerTool('dlq_list', {
      title: 'Dead letters',
      description: 'Tasks that failed for good and wait for a person: why, how many attempts, what they cost.',
      inputSchema: { dag_id: z.string().max(64).optional(), limit: z.number().int().min(1).max(1000).optional() },
    }, (a) => toolResult(async () => ({ entries: await dlqList(d.db, { dagId: a.dag_id, limit: a.limit ?? 100, tenants: p.tenants }) })));

    server.registerResource('dag', new ResourceTemplate('dagent://dags/{dag_id}', { list: undefined }), {
      title: 'A DAG', description: 'A DAG\'s status and its tasks, as JSON', mimeType: 'application/json',
    }, async (uri, vars) => {
      await reach('dag', String(vars.dag_id));
      return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(await dagStatus(d.db, String(vars.dag_id)), null, 2) }] };
    });
    server.registerResource('dag-graph', new ResourceTemplate('dagent://dags/{dag_id}/graph', { list: undefined }), {
      title: 'A DAG\'s graph', description: 'The DAG drawn in Mermaid, each task with its status', mimeType: 'text/vnd.mermaid',
    }, async (uri, vars) => {
      await reach('dag', String(vars.dag_id));
      const s = await dagStatus(d.db, String(vars.dag_id));
      const text = graphRender('mermaid', s.dag.name, s.tasks.map((t) => ({ key: t.key, status: t.status })), s.edges);
      return { contents: [{ uri: uri.href, mimeType: 'text/vnd.mermaid', text }] };
    });
    server.registerResource('task', new ResourceTemplate('dagent://tasks/{task_id}', { list: undefined }), {
      title: 'A task', description: 'A task\'s spec, inputs, output, attempts and events, as JSON', mimeType: 'application/json',
    }, async (uri, vars) => {
      await reach('task', String(vars.task_id));
      return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(await taskShow(d.db, String(vars.task_id)), null, 2) }] };
    });
    streamReadsRegister(server, d.db, (taskId) => reach('task', taskId));
  }

  if (can('admin')) {
    server.registerTool('dlq_retry', {
      title: 'Retry a dead letter', description: 'Put a dead-lettered task back to ready; the DAG flows on.',
      inputSchema: { id: z.string().max(64).describe('the dead letter\'s id (dlq_list)'), ...dlqRetryFields },
    }, (a) => toolResult(async () => (await reach('deadLetter', a.id), dlqRetry(d.db, a.id, { by, note: a.note, resetAttempts: a.reset_attempts }))));
    server.registerTool('dlq_cancel', {
      title: 'Cancel a dead letter', description: 'Give up on a dead-lettered task: it and what depends on it are cancelled. Say why in the note.',
      inputSchema: { id: z.string().max(64), ...dlqCancelFields },
    }, (a) => toolResult(async () => (await reach('deadLetter', a.id), dlqCancel(d.db, a.id, { by, note: a.note }))));
    server.registerTool('approve', {
      title: 'Approve', description: 'Approve the output (or the approval task) waiting on a task\'s approval step; optionally with an edited output.',
      inputSchema: { task_id: z.string().max(64), ...approveFields },
    }, (a) => toolResult(async () => (await reach('task', a.task_id), taskApprove(d.db, a.task_id, { by, comment: a.comment, output: a.output }, { log: d.log }))));
    server.registerTool('reject', {
      title: 'Reject', description: 'Reject the output waiting on a task\'s approval step, saying what to fix: the retry is told.',
      inputSchema: { task_id: z.string().max(64), ...rejectFields },
    }, (a) => toolResult(async () => (await reach('task', a.task_id), taskReject(d.db, a.task_id, { by, comment: a.comment }, { log: d.log }))));
  }
}
