import type { Logger } from 'pino';
import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { dagFindByIdempotencyKey, dagInsert, dagLockGraph } from '../../db/queries/dags.js';
import { edgeInsertMany } from '../../db/queries/edges.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { taskActivateCreated, taskInsertMany, taskQueuedCount, taskSubmitLock } from '../../db/queries/tasks-intake.js';
import { DEFAULT_TENANT, tenantQueuedLock, tenantQueueShare, tenantKnown, tenantReadyHintSet } from '../../db/queries/tenants.js';
import type { DagSpec } from '../../dag/spec.js';
import { LIMITS, limitEnvName } from '../../config/index.js';
import { BackpressureError, ConflictError, InvalidInputError, tenantUnknownError } from '../../errors.js';
import { mapSliced } from '../../event-loop.js';
import { newDagId, newTaskId } from '../../ids.js';
import { graphCheckAcyclic } from './graph-check.js';
import { dagPlan } from './critical-path.js';
import { taskRow } from '../attempt/task-row.js';

export interface SubmitOptions {
  /** Who created the DAGs: `cli`, `api`, `cron:<name>`, `agent:<id>`. Default `api`. */
  createdBy?: string;
  log?: Logger;
  /**
   * Backpressure: refuse (BackpressureError, nothing written) while READY + PENDING tasks number this many or more, and
   * the tenant holds its weight's share of them (queueFullFor). Default: no limit.
   */
  maxQueued?: number;
  /** The Retry-After a refusal suggests, in seconds. Default BACKPRESSURE_RETRY_AFTER_SEC. */
  retryAfterSec?: number;
  /** The tenant the DAGs belong to (it must exist). Default the default tenant. */
  tenant?: string;
}

export const BACKPRESSURE_RETRY_AFTER_SEC = 10;

export interface SubmitResult {
  dagId: string;
  name: string;
  tasks: number;
  /** False when a DAG with the same idempotency key already existed (its id is returned). */
  created: boolean;
}

/** Create DAGs in one transaction: all of them or none. */
export async function dagSubmit(db: Db, specs: DagSpec[], opts: SubmitOptions = {}): Promise<SubmitResult[]> {
  try {
    const results = await withTx(db, async (tx) => {
      if (opts.maxQueued !== undefined) await backpressureCheck(tx, opts.maxQueued, opts.tenant ?? DEFAULT_TENANT, opts.retryAfterSec ?? BACKPRESSURE_RETRY_AFTER_SEC);
      const out: SubmitResult[] = [];
      for (const spec of specs) out.push(await dagCreateInTx(tx, spec, { createdBy: opts.createdBy ?? 'api', tenant: opts.tenant }));
      return out;
    });
    for (const r of results) opts.log?.info({ dagId: r.dagId, name: r.name, tasks: r.tasks, created: r.created }, 'dag submitted');
    return results;
  } catch (e) {
    throw uniqueViolationExplain(e);
  }
}

/** Refuse (BackpressureError) a submit into `tenant` while the deployment's queue is full for it (queueFullFor). */
export async function backpressureCheck(tx: Db, limit: number, tenant: string, retryAfterSec: number = BACKPRESSURE_RETRY_AFTER_SEC): Promise<void> {
  const queued = await queueFullFor(tx, limit, tenant);
  if (queued !== undefined) throw new BackpressureError(queued, limit, retryAfterSec);
}

/**
 * Whether the deployment's queue (`--max-queued`) is full for new work of `tenant`: READY + PENDING tasks number
 * `limit` or more, and the tenant's unfinished tasks are at its weight's share of `limit` (its weight over all
 * tenants') or past it. A tenant under its share still gets work in past the limit, so one tenant filling the queue
 * never shuts the others out; what they add past it is at most their shares, so the queue stays under about twice
 * the limit. With one tenant, its share is the whole limit: the limit as it always was. Serialized with other
 * submissions. Returns the queued count when full, else undefined.
 */
export async function queueFullFor(tx: Db, limit: number, tenant: string): Promise<number | undefined> {
  await taskSubmitLock(tx);
  const queued = await taskQueuedCount(tx);
  if (queued < limit) return undefined;
  const share = await tenantQueueShare(tx, tenant);
  return share && share.open < limit * share.weightShare ? undefined : queued;
}

/** A task a rerun carries over (engine/dag/rerun-changed.ts): inserted completed with this output, from the task that made it. */
export interface CarriedTask { fromTaskId: string; output: unknown }

export interface DagCreateOptions {
  createdBy: string;
  /** Its tenant (it must exist). Default the default tenant. */
  tenant?: string;
  scheduledAt?: Date;
  /** A rerun with a change: the DAG it re-runs, what it changed (stored on the new DAG), and the tasks it carries over by key. */
  rerun?: { of: string; change: unknown; carried: ReadonlyMap<string, CarriedTask> };
}

/**
 * Insert one DAG inside the caller's transaction (submit, a schedule's fire, a rerun with a change).
 * A DAG whose idempotency key exists already is returned, not inserted again.
 */
export async function dagCreateInTx(tx: Db, spec: DagSpec, o: DagCreateOptions): Promise<SubmitResult> {
  const createdBy = o.createdBy;
  if (spec.idempotencyKey) {
    const existing = await dagFindByIdempotencyKey(tx, o.tenant ?? DEFAULT_TENANT, spec.idempotencyKey);
    if (existing) return { dagId: existing.id, name: existing.name, tasks: existing.tasksTotal, created: false };
  }
  if (spec.tasks.length > LIMITS.tasksPerDag) {
    throw new InvalidInputError(`DAG ${spec.name}: ${spec.tasks.length} tasks; at most ${LIMITS.tasksPerDag} in a DAG (${limitEnvName('tasksPerDag')})`);
  }
  const keys = new Set(spec.tasks.map((t) => t.key));
  if (keys.size !== spec.tasks.length) throw new InvalidInputError(`DAG ${spec.name}: task keys must be unique`);
  const edgeCount = spec.tasks.reduce((n, t) => n + t.dependsOn.length, 0);
  if (edgeCount > LIMITS.edgesPerDag) {
    throw new InvalidInputError(`DAG ${spec.name}: ${edgeCount} dependencies; at most ${LIMITS.edgesPerDag} in a DAG (${limitEnvName('edgesPerDag')})`);
  }
  for (const t of spec.tasks) {
    if (t.waitFor && (t.output?.validation !== undefined || t.concurrency)) {
      throw new InvalidInputError(`DAG ${spec.name}: task ${t.key} waits for a signal and runs no agent: it takes no output validation or concurrency key`);
    }
    for (const d of t.dependsOn) if (!keys.has(d)) throw new InvalidInputError(`DAG ${spec.name}: task ${t.key} depends on unknown task ${d}`);
  }
  const tenant = o.tenant ?? DEFAULT_TENANT;
  if (!(await tenantKnown(tx, tenant))) {
    throw tenantUnknownError(tenant);
  }
  // A tenant's queued quota: its unfinished tasks and these stay within it (its submits serialized on its row).
  const queued = await tenantQueuedLock(tx, tenant);
  if (queued && queued.open + spec.tasks.length - (o.rerun?.carried.size ?? 0) > queued.maxQueued) {
    throw new BackpressureError(queued.open, queued.maxQueued, BACKPRESSURE_RETRY_AFTER_SEC, tenant);
  }
  await tenantReadyHintSet(tx, tenant);
  const carried = o.rerun?.carried ?? new Map<string, CarriedTask>();
  const dagId = newDagId();
  await dagInsert(tx, {
    id: dagId,
    name: spec.name,
    title: spec.title,
    params: spec.params,
    spec: { description: spec.description ?? null },
    sourceFile: spec.sourceFile,
    budgetUsd: spec.budgetUsd,
    dailyBudgetUsd: spec.dailyBudgetUsd,
    budgetLowAt: spec.budgetLowAt,
    tasksTotal: spec.tasks.length,
    tasksOpen: spec.tasks.length - carried.size,
    idempotencyKey: spec.idempotencyKey,
    createdBy,
    scheduledAt: o.scheduledAt,
    spawnPolicy: spec.spawn ?? null,
    tags: [...new Set(spec.tasks.flatMap((t) => t.tags))].sort(),
    rerunOf: o.rerun?.of ?? null,
    rerunChange: o.rerun?.change ?? null,
    tenantId: tenant,
  });
  await dagLockGraph(tx, dagId);
  const idByKey = new Map(spec.tasks.map((t) => [t.key, newTaskId()]));
  const edgeKeys = spec.tasks.flatMap((t) => t.dependsOn.map((d) => [d, t.key] as const));
  // The graph and the rows in slices, and statements between the steps: a large DAG's JavaScript in one go would
  // hold the process's other requests meanwhile (a claim beside a 10,000-task submit waited up to 0.2 s).
  const graph = await graphCheckAcyclic([...keys], edgeKeys, `DAG ${spec.name}: `);
  const plan = await dagPlan(tx, spec.tasks, graph);
  await taskInsertMany(tx, await mapSliced(spec.tasks, (t) => {
    const row = { ...taskRow(t, dagId, idByKey.get(t.key)!, undefined, plan.get(t.key)), tenantId: tenant };
    if (carried.size === 0) return row;
    // A carried task is done; the others wait only for their upstream tasks that run (all of a carried task's are carried).
    const from = carried.get(t.key);
    return from ? { ...row, depsRemaining: 0, reusedFrom: from.fromTaskId, output: from.output ?? null }
      : { ...row, depsRemaining: t.dependsOn.filter((d) => !carried.has(d)).length };
  }));
  await edgeInsertMany(tx, edgeKeys.map(([u, v]) => ({ dagId, upstreamId: idByKey.get(u)!, downstreamId: idByKey.get(v)! })));
  await taskActivateCreated(tx, dagId);
  await eventInsertMany(tx, [{
    type: 'dag.submitted', dagId,
    data: { name: spec.name, tasks: spec.tasks.length, createdBy, sourceFile: spec.sourceFile, ...(o.rerun ? { rerunOf: o.rerun.of, reused: carried.size } : {}) },
  }]);
  return { dagId, name: spec.name, tasks: spec.tasks.length, created: true };
}

function uniqueViolationExplain(e: unknown): unknown {
  // drizzle wraps the driver's error; the Postgres fields are on its cause.
  const err = ((e as { cause?: unknown })?.cause ?? e) as { code?: string; constraint?: string; detail?: string };
  if (err?.code === '23505' && err.constraint === 'tasks_tenant_idempotency_key_uq') {
    return new ConflictError(`task idempotency key already used: ${err.detail ?? ''}`.trim());
  }
  if (err?.code === '23505' && err.constraint === 'dags_tenant_idempotency_key_uq') {
    return new ConflictError(`DAG idempotency key already used by a concurrent submission: ${err.detail ?? ''}`.trim());
  }
  return e;
}
