import type { Db } from '../db/connection.js';
import { agentList } from '../db/queries/agents.js';
import { attemptListForTask } from '../db/queries/attempts.js';
import { dagGet } from '../db/queries/dags.js';
import { deadLetterList } from '../db/queries/dead-letters.js';
import { edgeListForDag } from '../db/queries/edges.js';
import { eventListForTask } from '../db/queries/events.js';
import { taskCountsByStatusTier, taskGet, taskOutputsByKeys, taskList, taskListForDag, taskOldestReadyAgeSec } from '../db/queries/tasks.js';
import { InvalidInputError, NotFoundError } from '../errors.js';
import type { TaskBody } from '../dag/spec.js';
import { didYouMean } from '../dag/suggest.js';
import { contextResolve } from './claim.js';
import { TASK_STATES } from './state-machine.js';

/** A DAG with its tasks, edges and open dead letters: what `dagent status` shows. */
export async function dagStatus(db: Db, dagId: string) {
  const dag = await dagGet(db, dagId);
  if (!dag) throw new NotFoundError('DAG', dagId);
  const [tasks, edges, deadLetters] = await Promise.all([
    taskListForDag(db, dagId), edgeListForDag(db, dagId), deadLetterList(db, { dagId, open: true }),
  ]);
  return {
    dag,
    tasks,
    edges: edges.map((e) => ({ upstream: e.upstreamKey, downstream: e.downstreamKey })),
    deadLetters: deadLetters.map((d) => ({ ...d.entry, taskKey: d.taskKey })),
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

export async function taskListFiltered(db: Db, filter: { dagId?: string; status?: string; limit?: number }) {
  if (filter.status && !(TASK_STATES as readonly string[]).includes(filter.status)) {
    throw new InvalidInputError(`unknown status "${filter.status}"${didYouMean(filter.status, TASK_STATES)}; one of ${TASK_STATES.join(', ')}`);
  }
  return taskList(db, filter);
}

/** Queue health at a glance: counts by status and priority tier, oldest READY age, agents. */
export async function statsGet(db: Db) {
  const [counts, oldestReadyAgeSec, agents] = await Promise.all([taskCountsByStatusTier(db), taskOldestReadyAgeSec(db), agentList(db)]);
  return {
    counts,
    oldestReadyAgeSec,
    agents: agents.map((a) => ({ id: a.id, type: a.type, status: a.status, capabilities: a.capabilities, heartbeatAt: a.heartbeatAt, budgetUsd: a.budgetUsd, spentUsd: a.spentUsd })),
  };
}

/** Attempts of a DAG by outcome, and how many failures were retried: the run summary's figures. */
export { attemptCountsForDag } from '../db/queries/attempts.js';
