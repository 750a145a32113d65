import type { Db } from '../../db/handle.js';
import { agentList } from '../../db/queries/agents.js';
import { attemptCountsForDag as attemptCountsOfDag, attemptListForTask } from '../../db/queries/attempts.js';
import { dagGet, dagPage, dagRerunsOf } from '../../db/queries/dags.js';
import { cursorEncode, cursorParse } from '../../db/queries/keyset.js';
import { deadLetterList } from '../../db/queries/dead-letters.js';
import { edgeListForDag } from '../../db/queries/edges.js';
import { loopLeaseList } from '../../db/queries/maintenance-leases.js';
import { servesBeyond } from '../../db/queries/tenants.js';
import { modelPauseList, type ModelPauseRow } from '../../db/queries/model-pauses.js';
import { eventListForTask } from '../../db/queries/events.js';
import { tenantRequire, tenantShares } from './tenants.js';
import { taskCountsByStatusTier, taskGet, taskOutputsByKeys, taskList, taskListForDag, taskOldestReadyAgeSec } from '../../db/queries/tasks-read.js';
import type { DagListFilter, DagRow } from '../../db/rows.js';
import { InvalidInputError, NotFoundError } from '../../errors.js';
import type { TaskBody } from '../../dag/spec.js';
import { didYouMean } from '../../dag/suggest.js';
import { contextResolve } from '../attempt/claim.js';
import { TASK_STATES } from '../../model/state-machine.js';

/** The DAG, or NotFoundError. */
export async function dagRequire(db: Db, dagId: string) {
  const dag = await dagGet(db, dagId);
  if (!dag) throw new NotFoundError('DAG', dagId);
  return dag;
}

/**
 * A DAG with its tasks, edges and open dead letters, and the reruns with a change made of it (dag rerun --model/--set;
 * the one it is a rerun of is `dag.rerunOf`): what `dagent status` shows.
 */
export async function dagStatus(db: Db, dagId: string) {
  const dag = await dagGet(db, dagId);
  if (!dag) throw new NotFoundError('DAG', dagId);
  const [tasks, edges, deadLetters, reruns] = await Promise.all([
    taskListForDag(db, dagId), edgeListForDag(db, dagId), deadLetterList(db, { dagId, open: true }), dagRerunsOf(db, dagId),
  ]);
  return {
    dag,
    tasks,
    edges: edges.map((e) => ({ upstream: e.upstreamKey, downstream: e.downstreamKey })),
    deadLetters: deadLetters.rows.map((d) => ({ ...d.entry, taskKey: d.taskKey })),
    reruns,
  };
}

/** One task in full: spec, resolved inputs, output, attempts and event history. */
export async function taskShow(db: Db, taskId: string) {
  const task = await taskGet(db, taskId);
  if (!task) throw new NotFoundError('task', taskId);
  const body = task.spec as TaskBody;
  const upstream = task.contextKeys.length ? await taskOutputsByKeys(db, task.dagId, task.contextKeys) : [];
  const outputs = Object.fromEntries(upstream.map((u) => [u.key, u.output]));
  const [attempts, events] = await Promise.all([attemptListForTask(db, taskId), eventListForTask(db, taskId)]);
  return { task, inputs: contextResolve(body.context ?? [], outputs), attempts, events };
}

export async function taskListFiltered(db: Db, filter: { dagId?: string; status?: string; limit?: number; tenants?: readonly string[] | null }) {
  if (filter.status && !(TASK_STATES as readonly string[]).includes(filter.status)) {
    throw new InvalidInputError(`unknown status "${filter.status}"${didYouMean(filter.status, TASK_STATES)}; one of ${TASK_STATES.join(', ')}`);
  }
  return taskList(db, filter);
}

/** Queue health at a glance: counts by status and priority tier, oldest READY age, agents. */
export async function statsGet(db: Db, opts: { tenant?: string; tenants?: readonly string[] | null } = {}) {
  // A token scoped to tenants sees one of its own: the one it names (another is a tenant that does not exist), or its only one.
  const scope = opts.tenants ?? null;
  if (scope && opts.tenant !== undefined && !scope.includes(opts.tenant)) throw new NotFoundError('tenant', opts.tenant);
  if (scope && opts.tenant === undefined && scope.length > 1) {
    throw new InvalidInputError(`query.tenant: the token reaches several tenants (${scope.join(', ')}); name one`, { field: 'query.tenant' });
  }
  const tenant = opts.tenant ?? (scope ? scope[0] : undefined);
  if (tenant !== undefined) await tenantRequire(db, tenant);
  const [counts, oldestReadyAgeSec, agents, pauses, loops, tenants] = await Promise.all([
    taskCountsByStatusTier(db, tenant), taskOldestReadyAgeSec(db, tenant), agentList(db, scope), modelPauseList(db), loopLeaseList(db), tenantShares(db),
  ]);
  return {
    /** The tenant the counts and the oldest READY age are of; null: every tenant's. */
    tenant: tenant ?? null,
    counts,
    oldestReadyAgeSec,
    /** Each tenant (or the one asked for): its weight and served share, its work now, its quotas and why its work waits. */
    tenants: tenant === undefined ? tenants : tenants.filter((t) => t.id === tenant),
    /** Models paused now after a provider's rate limit: no claim hands out a task on them until `until`. */
    // The reason is a provider's answer to some tenant's attempt: not another tenant's to read.
    pausedModels: pauses.filter((p) => p.remainingSec > 0).map((p) => ({ model: p.model, until: p.until, remainingSec: p.remainingSec, reason: scope ? null : p.reason, hits: p.hits })),
    // An agent that also serves tenants beyond a scoped reader's spent partly for them: its spend is not shown.
    agents: agents.map((a) => ({ id: a.id, type: a.type, status: a.status, capabilities: a.capabilities, heartbeatAt: a.heartbeatAt, budgetUsd: a.budgetUsd, spentUsd: servesBeyond(a.tenants, scope) ? null : a.spentUsd })),
    /** Which process runs each maintenance loop (`<host>/<pid>/<random>`), since when, when it last ran; `live` false: its holder stopped renewing. */
    loops,
  };
}

/**
 * DAGs, newest first, with their task counts by status, a page at a time: `next` (null on the last page) is the
 * `cursor` of the page after. Filters: status, `q` (the id, or part of the name or title), a tag, a creation range.
 */
export async function dagList(
  db: Db, filter: Omit<DagListFilter, 'cursor'> & { cursor?: string } = {},
): Promise<{ dags: Array<DagRow & { taskCounts: Record<string, number> }>; next: string | null }> {
  const cursor = cursorParse(filter.cursor);
  const page = await dagPage(db, { ...filter, cursor });
  return { dags: page.dags, next: page.next ? cursorEncode(page.next) : null };
}

/** Attempts of a DAG by outcome, and how many failures were retried: the run summary's figures. */
export function attemptCountsForDag(db: Db, dagId: string): Promise<{ completed: number; failed: number; retried: number }> {
  return attemptCountsOfDag(db, dagId);
}

/**
 * A DAG as a drawable graph: each task with its status and depth (longest path
 * from a root), the edges, and the critical path: from the root with the largest
 * upward rank, always on to the successor with the largest rank (ranks are the
 * longest remaining path of estimates, kept by the priority refresher).
 */
export async function dagGraph(db: Db, dagId: string) {
  const { dag, tasks, edges, deadLetters, reruns } = await dagStatus(db, dagId);
  const byKey = new Map(tasks.map((t) => [t.key, t]));
  const keyById = new Map(tasks.map((t) => [t.id, t.key]));
  const succ = new Map<string, string[]>();
  const indeg = new Map(tasks.map((t) => [t.key, 0]));
  for (const e of edges) {
    succ.set(e.upstream, [...(succ.get(e.upstream) ?? []), e.downstream]);
    indeg.set(e.downstream, (indeg.get(e.downstream) ?? 0) + 1);
  }
  const depth = new Map<string, number>();
  const queue = tasks.filter((t) => indeg.get(t.key) === 0).map((t) => t.key);
  const remaining = new Map(indeg);
  for (const k of queue) depth.set(k, 0);
  for (let i = 0; i < queue.length; i++) {
    const k = queue[i]!;
    for (const d of succ.get(k) ?? []) {
      depth.set(d, Math.max(depth.get(d) ?? 0, depth.get(k)! + 1));
      remaining.set(d, remaining.get(d)! - 1);
      if (remaining.get(d) === 0) queue.push(d);
    }
  }
  const rank = (k: string) => byKey.get(k)?.cpRankSec ?? 0;
  const criticalPath: string[] = [];
  let at = tasks.filter((t) => indeg.get(t.key) === 0).map((t) => t.key).sort((a, b) => rank(b) - rank(a))[0];
  while (at) {
    criticalPath.push(at);
    at = [...(succ.get(at) ?? [])].sort((a, b) => rank(b) - rank(a))[0];
  }
  return {
    dag,
    nodes: tasks.map((t) => ({
      id: t.id, key: t.key, type: t.type, title: t.title, status: t.status, depth: depth.get(t.key) ?? 0,
      parentKey: t.parentId ? keyById.get(t.parentId) ?? null : null,
      priority: t.priority, effectivePriority: t.effectivePriority, cpRankSec: t.cpRankSec, estimateSec: t.estimateSec,
      attempts: t.attempts, maxAttempts: t.maxAttempts, claimedBy: t.claimedBy, lastError: t.lastError, costUsd: t.costUsd,
      reusedFrom: t.reusedFrom,
    })),
    edges,
    criticalPath,
    deadLetters,
    reruns,
  };
}

/** The models paused after a provider's rate limit, and those whose pause has lifted (how many limits each took). */
export function modelPausesList(db: Db): Promise<ModelPauseRow[]> {
  return modelPauseList(db);
}
