import type { Logger } from 'pino';
import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { taskOutputsByKeys } from '../../db/queries/tasks-read.js';
import { taskMapChildren, taskMapChildrenSize, taskMapLock, taskMapWait, taskMapWaiting, type MapParentRow } from '../../db/queries/tasks-map.js';
import { dagLockGraph } from '../../db/queries/dags.js';
import { DagentError } from '../../errors.js';
import { LIMITS, limitEnvName } from '../../config/index.js';
import type { ForEachSpec, TaskBody, TaskOrigin, TaskSpec } from '../../dag/spec.js';
import { contextResolve } from '../attempt/claim.js';
import { completionInput, completionWrite, outputProblem } from '../attempt/completion-write.js';
import { taskFail } from '../attempt/fail.js';
import { subtasksAdd } from './subtasks-add.js';

/**
 * for_each (Airflow's dynamic task mapping, Argo's withParam): a mapped task runs no agent. When its upstream
 * tasks are done it WAITS (the await trigger, wait_key `map/<id>`), and the waits loop maps it: reads its list,
 * adds one child per item through the path spawned subtasks take (subtasksAdd: the graph lock, the cycle check,
 * the DAG's limits, one transaction) and makes it wait for them. When the last child completes the task WAITS
 * again and the loop completes it with the children's outputs, in item order: what a task downstream receives.
 * A list that is not a list, or longer than LIMITS.mapItems, fails the task (class invalid_input, no retry).
 */

/** The error class of a for_each whose list cannot be mapped: not retried, since the same list fails the same way. */
export const MAP_ERROR_CLASS = 'invalid_input';

type Settled = 'mapped' | 'completed' | 'failed' | 'skipped';

/** One pass of the waits loop over WAITING for_each tasks. Returns how many it moved on. */
export async function mapTasksSettle(db: Db, opts: { batch: number; log?: Logger }): Promise<number> {
  let n = 0;
  for (const t of await taskMapWaiting(db, opts.batch)) {
    const r = await mapTaskSettle(db, t, opts.log).catch((e: unknown) => {
      opts.log?.warn({ taskId: t.id, err: e }, 'for_each not settled; the next pass tries again');
      return 'skipped' as const;
    });
    if (r !== 'skipped') n++;
  }
  return n;
}

type Pass = { settled: Settled; failure?: string; dagId?: string; children?: number };

async function mapTaskSettle(db: Db, t: { id: string; fence: number; dagId: string }, log?: Logger): Promise<Settled> {
  const r = await withTx(db, (tx) => mapPass(tx, t)).catch((e: unknown): Pass => {
    // A refusal (the DAG's task or edge limit, a key taken): the same list would be refused again, so the task
    // fails for a person to see, rather than waiting for ever at the head of every pass. A lost connection is retried.
    if (e instanceof DagentError) return { settled: 'failed', failure: `its children could not be added: ${e.message}` };
    throw e;
  });
  if (r.failure !== undefined) {
    await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: MAP_ERROR_CLASS, message: `for_each: ${r.failure}`, retryable: false }, { log });
  }
  if (r.settled !== 'skipped') log?.info({ taskId: t.id, dagId: t.dagId, settled: r.settled, children: r.children }, 'for_each settled');
  return r.settled;
}

async function mapPass(tx: Db, t: { id: string; fence: number; dagId: string }): Promise<Pass> {
  // The DAG's graph lock first, then the task's row: the order cancel and re-run take them in.
  await dagLockGraph(tx, t.dagId);
  const p = await taskMapLock(tx, t.id, t.fence);
  if (!p) return { settled: 'skipped' };
  const size = await taskMapChildrenSize(tx, p.id);
  if (size.children > 0) {
    // Back after its children: all of them completed (that is what made it READY, so WAITING).
    if (size.open > 0) return { settled: 'skipped' };
    // Measured in the database before anything is loaded: 10,000 outputs of 1 MiB never reach this process.
    if (size.bytes > LIMITS.mapOutputBytes) {
      return { settled: 'failed', failure: `its ${size.children} children's outputs are ${size.bytes} bytes as JSON; their list may be at most ${LIMITS.mapOutputBytes} (${limitEnvName('mapOutputBytes')})` };
    }
    const output = (await taskMapChildren(tx, p.id)).map((c) => c.output);
    // The list is one level deeper than the outputs in it, each of which was allowed the full depth.
    const bad = outputProblem(output, LIMITS.mapOutputBytes, LIMITS.jsonDepth + 1);
    if (bad) return { settled: 'failed', failure: `the list of its ${size.children} children's outputs cannot be stored: ${bad.replace(/^output/, 'the list')}` };
    await completionWrite(tx, [completionInput({ taskId: p.id, fence: p.fence, output }, { for_each: { children: size.children } }, LIMITS.mapOutputBytes, LIMITS.jsonDepth + 1)]);
    return { settled: 'completed' };
  }
  const forEach = (p.spec as { forEach?: ForEachSpec }).forEach!;
  const items = await itemsOf(tx, p, forEach);
  if (typeof items === 'string') return { settled: 'failed', failure: items };
  if (items.length === 0) {
    await completionWrite(tx, [completionInput({ taskId: p.id, fence: p.fence, output: [] }, { for_each: { children: 0 } })]);
    return { settled: 'completed' };
  }
  // Each child is a copy of the task's spec: a long prompt times many items is refused before anything is written.
  const { forEach: _list, ...body } = p.spec;
  const specBytes = Buffer.byteLength(JSON.stringify(body)) * items.length + Buffer.byteLength(JSON.stringify(items));
  if (specBytes > LIMITS.mapSpecBytes) {
    return { settled: 'failed', failure: `${items.length} children of this task's spec would be ${specBytes} bytes; at most ${LIMITS.mapSpecBytes} (${limitEnvName('mapSpecBytes')}): map over fewer items, or shorten the prompt` };
  }
  // Items an upstream agent produced are data it gave: the children's origin says so (as a template's fields).
  const origin: TaskOrigin = 'over' in forEach ? 'template' : p.origin as TaskOrigin;
  await subtasksAdd(tx, p, items.map((item, index) => childSpec(p, item, index, origin)), {
    wait: true, event: 'task.mapped', parentWait: (n) => taskMapWait(tx, { id: p.id, fence: p.fence, children: n }),
  });
  return { settled: 'mapped', dagId: p.dagId, children: items.length };
}

/** The list to map over, or why it is not one. */
async function itemsOf(db: Db, p: MapParentRow, forEach: ForEachSpec): Promise<unknown[] | string> {
  let items: unknown;
  if ('items' in forEach) items = forEach.items;
  else {
    const key = forEach.over.split('.')[0]!;
    const outputs = Object.fromEntries((await taskOutputsByKeys(db, p.dagId, [key])).map((o) => [o.key, o.output]));
    items = contextResolve([forEach.over], outputs)[forEach.over];
    if (!Array.isArray(items)) return `${forEach.over} is ${describe(items)}, not a list`;
  }
  const list = items as unknown[];
  if (list.length > LIMITS.mapItems) return `${'over' in forEach ? forEach.over : 'the list'} has ${list.length} items; a for_each maps over at most ${LIMITS.mapItems} (${limitEnvName('mapItems')})`;
  return list;
}

function describe(v: unknown): string {
  if (v === undefined) return 'missing';
  if (v === null) return 'null';
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`;
}

/** Child `index` of a for_each task: its spec, with the item and its index in spec.input. */
function childSpec(p: MapParentRow, item: unknown, index: number, origin: TaskOrigin): TaskSpec {
  const { forEach: _list, ...body } = p.spec as unknown as TaskBody;
  return {
    key: String(index),
    type: p.type,
    ...(p.title !== null ? { title: p.title } : {}),
    body: { ...body, input: { ...body.input, item, index } },
    requiredCapabilities: p.requiredCapabilities,
    ...(p.maxCostUsd !== null ? { maxCostUsd: p.maxCostUsd } : {}),
    ...(p.maxTokens !== null ? { maxTokens: p.maxTokens } : {}),
    ...(p.estimatedTokens !== null ? { estimatedTokens: p.estimatedTokens } : {}),
    ...(p.maxDurationSec !== null ? { maxDurationSec: p.maxDurationSec } : {}),
    ...(p.heartbeatSec !== null ? { heartbeatSec: p.heartbeatSec } : {}),
    priority: p.priority,
    boostPerMinute: p.boostPerMinute,
    estimateSec: p.estimateSec,
    ...(p.deadline !== null ? { deadline: { at: p.deadline } } : {}),
    dependsOn: [],
    maxAttempts: p.maxAttempts,
    retry: p.retryPolicy,
    ...(p.outputSpec !== null ? { output: p.outputSpec } : {}),
    tags: p.tags,
    origin,
    ...(p.concKey !== null && p.concLimit !== null ? { concurrency: { key: p.concKey, limit: p.concLimit } } : {}),
  };
}
