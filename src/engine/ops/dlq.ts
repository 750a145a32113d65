import { z } from 'zod';
import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { dagLockGraph, dagStatusRefresh } from '../../db/queries/dags.js';
import {
  deadLetterGet, deadLetterIdsMatching, deadLetterList, deadLetterResolve,
} from '../../db/queries/dead-letters.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { taskCancelCascade } from '../../db/queries/tasks-cancel.js';
import { taskDeadLetterEdit, taskDeadLetterRetry, type TaskEdit } from '../../db/queries/tasks-dead-letter.js';
import { taskGet } from '../../db/queries/tasks-read.js';
import { cursorEncode, cursorParse } from '../../db/queries/keyset.js';
import { capabilitySchema } from '../../dag/file-schema.js';
import { modelNameSchema } from '../../llm-models.js';
import { DeadLetterResolvedError, InvalidInputError, NotFoundError } from '../../errors.js';
import { cancelledSettle } from '../dag/cancel.js';
import type { DeadLetterRow, DeadLetterSelector, TaskRow } from '../../db/rows.js';

/** Which entries to list: open ones unless `all`, matching every selector field given. */
export interface DlqFilter extends DlqSelector { all?: boolean; limit?: number }

/** Entries newest first (the first page: `limit`, default 200), each with its task's key and type. */
export async function dlqList(db: Db, filter: DlqFilter = {}) {
  return (await dlqPage(db, filter)).entries;
}

/** A page of entries newest first; `next` (null on the last page) is the `cursor` of the page after. */
export async function dlqPage(db: Db, filter: DlqFilter & { cursor?: string } = {}) {
  const cursor = cursorParse(filter.cursor);
  const { all, limit, cursor: _raw, ...selector } = filter;
  const page = await deadLetterList(db, { ...selector, open: !all, limit, cursor });
  return { entries: page.rows.map((r) => ({ ...r.entry, taskKey: r.taskKey, taskType: r.taskType })), next: page.next ? cursorEncode(page.next) : null };
}

export async function dlqShow(db: Db, id: string): Promise<{ entry: DeadLetterRow; task: TaskRow }> {
  const entry = await deadLetterGet(db, id);
  if (!entry) throw new NotFoundError('dead letter', id);
  return { entry, task: (await taskGet(db, entry.taskId))! };
}

export interface Resolution { by?: string; note?: string }

/** Put a dead-lettered task back to READY (optionally with a fresh attempt budget); the DAG flows on. */
export async function dlqRetry(db: Db, id: string, opts: Resolution & { resetAttempts?: boolean } = {}): Promise<DeadLetterRow> {
  return withTx(db, (tx) => retryInTx(tx, id, opts));
}

/** Give up on a dead-lettered task: cancel it and what depends on it, with a note. */
export async function dlqCancel(db: Db, id: string, opts: Resolution = {}): Promise<DeadLetterRow> {
  return withTx(db, (tx) => cancelInTx(tx, id, opts));
}

/**
 * What a human may change in a dead-lettered task before retrying it: the agent's
 * instructions and inputs, models, required capabilities, priority, attempts and cost cap.
 * Field names as in a DAG file.
 */
export const taskEditSchema = z.strictObject({
  title: z.string().max(200).optional(),
  prompt: z.string().max(100_000).optional(),
  input: z.record(z.string(), z.unknown()).optional(),
  models: z.array(modelNameSchema).max(16).optional(),
  fallback_models: z.array(modelNameSchema).max(16).optional(),
  requires: z.array(capabilitySchema).max(32).optional(),
  priority: z.number().int().min(0).max(100).optional(),
  max_attempts: z.number().int().min(1).max(100).optional(),
  max_cost_usd: z.number().positive().nullable().optional(),
}).refine((e) => Object.keys(e).length > 0, { error: 'an edit must change at least one field' });
export type TaskEditInput = z.input<typeof taskEditSchema>;

/** Edit the task's spec, then retry it, in one transaction; the edit and the previous values are recorded as an event. */
export async function dlqEditRetry(db: Db, id: string, edit: TaskEditInput, opts: Resolution & { resetAttempts?: boolean } = {}): Promise<DeadLetterRow> {
  const parsed = taskEditSchema.safeParse(edit);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new InvalidInputError(`edit${issue.path.length ? `.${issue.path.join('.')}` : ''}: ${issue.message}`, { issues: parsed.error.issues });
  }
  const e = parsed.data;
  const change: TaskEdit = {
    title: e.title, prompt: e.prompt, input: e.input, models: e.models, fallbackModels: e.fallback_models,
    requiredCapabilities: e.requires ? [...new Set(e.requires)].sort() : undefined,
    priority: e.priority, maxAttempts: e.max_attempts, maxCostUsd: e.max_cost_usd,
  };
  return withTx(db, async (tx) => {
    const entry = await openEntry(tx, id);
    const before = (await taskGet(tx, entry.taskId))!;
    const body = before.spec as { models?: string[]; fallbackModels?: string[] };
    const current = { requiredCapabilities: before.requiredCapabilities, models: body.models ?? [], fallbackModels: body.fallbackModels ?? [], tenantId: before.tenantId };
    if (!(await taskDeadLetterEdit(tx, entry.taskId, change, current))) throw new DeadLetterResolvedError(entry.id, entry.resolution, entry.resolvedAt);
    const previous = {
      title: before.title, spec: before.spec, requires: before.requiredCapabilities, priority: before.priority,
      max_attempts: before.maxAttempts, max_cost_usd: before.maxCostUsd,
    };
    await eventInsertMany(tx, [{ type: 'dlq.edited', dagId: entry.dagId, taskId: entry.taskId, data: { deadLetterId: id, by: opts.by ?? 'human', edit: e, previous } }]);
    return retryInTx(tx, id, opts);
  });
}

/** A bulk action's selection: at least one field, so "everything" is never one typo away. */
export type DlqSelector = DeadLetterSelector;

export const DLQ_BULK_MAX = 1000;

/** Retry or cancel every open entry the selector matches (up to DLQ_BULK_MAX), all in one transaction. */
export async function dlqBulk(
  db: Db, selector: DlqSelector, action: 'retry' | 'cancel', opts: Resolution & { resetAttempts?: boolean } = {},
): Promise<{ action: 'retry' | 'cancel'; ids: string[] }> {
  if (!selector.dagId && !selector.type && !selector.errorClass && !selector.agentId && !selector.q && !selector.from && !selector.to) {
    throw new InvalidInputError('a bulk action needs a filter: dag, type, error class, agent, search or date range');
  }
  return withTx(db, async (tx) => {
    // The oldest entries first for the limit, then DAG by DAG in id order: the lock order every
    // transaction that touches several DAGs keeps (agents, then DAGs by id, then tasks).
    const entries = (await deadLetterIdsMatching(tx, selector, DLQ_BULK_MAX)).sort((a, b) => (a.dagId < b.dagId ? -1 : a.dagId > b.dagId ? 1 : 0));
    for (const dagId of new Set(entries.map((e) => e.dagId))) await dagLockGraph(tx, dagId);
    for (const { id } of entries) await (action === 'retry' ? retryInTx(tx, id, opts) : cancelInTx(tx, id, opts));
    return { action, ids: entries.map((e) => e.id) };
  });
}

async function retryInTx(tx: Db, id: string, opts: Resolution & { resetAttempts?: boolean }): Promise<DeadLetterRow> {
  const entry = await openEntry(tx, id);
  await dagLockGraph(tx, entry.dagId);
  await deadLetterResolve(tx, id, 'retried', opts.by ?? 'human', opts.note ?? null);
  await taskDeadLetterRetry(tx, entry.taskId, opts.resetAttempts ?? false);
  await dagStatusRefresh(tx, [entry.dagId]);
  await eventInsertMany(tx, [{ type: 'dlq.retried', dagId: entry.dagId, taskId: entry.taskId, data: { deadLetterId: id, resetAttempts: opts.resetAttempts ?? false, by: opts.by ?? 'human', note: opts.note ?? null } }]);
  return (await deadLetterGet(tx, id))!;
}

async function cancelInTx(tx: Db, id: string, opts: Resolution): Promise<DeadLetterRow> {
  const entry = await openEntry(tx, id);
  await dagLockGraph(tx, entry.dagId);
  await deadLetterResolve(tx, id, 'cancelled', opts.by ?? 'human', opts.note ?? null);
  const cancelled = await taskCancelCascade(tx, [entry.taskId]);
  await cancelledSettle(tx, cancelled, opts.by ?? 'human', opts.note);
  await eventInsertMany(tx, [{ type: 'dlq.cancelled', dagId: entry.dagId, taskId: entry.taskId, data: { deadLetterId: id, by: opts.by ?? 'human', note: opts.note ?? null } }]);
  return (await deadLetterGet(tx, id))!;
}

async function openEntry(tx: Db, id: string): Promise<DeadLetterRow> {
  const entry = await deadLetterGet(tx, id);
  if (!entry) throw new NotFoundError('dead letter', id);
  if (entry.resolution) throw new DeadLetterResolvedError(entry.id, entry.resolution, entry.resolvedAt);
  return entry;
}
