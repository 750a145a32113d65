import type { Db } from '../../db/handle.js';
import { textHead } from '../../json-guard.js';
import { dagGet } from '../../db/queries/dags.js';
import { taskCompareRows, type TaskCompareRow } from '../../db/queries/tasks-compare.js';
import type { DagRow } from '../../db/rows.js';
import { canonicalJson } from '../../canonical-json.js';
import { InvalidInputError, NotFoundError } from '../../errors.js';
import { taskKeyCompare } from '../../model/task-key-order.js';
import type { StepVerdict } from '../../validation/verdict.js';

/**
 * Two runs of a DAG side by side (`dagent dag compare A B`, GET /api/dags/:id/compare/:other, the dashboard's compare
 * page): per task key, each run's output, validation verdicts, cost, tokens, time and attempts, and the totals. Made
 * for a DAG and its rerun with a change (dag rerun --model/--set), but any two DAGs compare: keys one lacks show
 * on the other side alone.
 */

/** One task of one run. */
export interface CompareSide {
  taskId: string;
  status: string;
  /** Carried over by a rerun with a change, from this task (it ran nothing, cost nothing). */
  reusedFrom: string | null;
  /** The model of its last attempt that completed or failed (a carried task's: of the task that made its output). */
  model: string | null;
  /** The output as text (a string as it is, anything else as JSON), cut to `outputChars` when asked; null: no output. */
  outputText: string | null;
  /** The full text's length, in characters (UTF-16 code units). */
  outputLength: number;
  outputTruncated: boolean;
  /** The verdicts of that attempt: what passed it, or what rejected its output; empty without validation steps. */
  verdicts: StepVerdict[];
  /** What its attempts cost; null: cost unknown (a usage report had no price for its model). */
  costUsd: number | null;
  tokensIn: number;
  tokensOut: number;
  /** Its attempts' time working; null when none ran. */
  durationMs: number | null;
  attempts: number;
}

export interface CompareRow {
  key: string;
  a: CompareSide | null;
  b: CompareSide | null;
  /** Both runs have an output, and they are equal (as JSON, whatever the key order). */
  sameOutput: boolean;
}

export interface CompareTotals {
  tasks: number;
  completed: number;
  reused: number;
  /** What the tasks of known cost cost. */
  costUsd: number;
  /** How many tasks' cost is unknown (not in costUsd). */
  costUnknownTasks: number;
  tokensIn: number;
  tokensOut: number;
  durationMs: number;
  attempts: number;
  /** Verdicts given, and how many passed. */
  verdicts: number;
  verdictsPassed: number;
}

export interface CompareDag {
  id: string;
  name: string;
  status: string;
  createdAt: Date;
  completedAt: Date | null;
  rerunOf: string | null;
  rerunChange: unknown;
  totals: CompareTotals;
}

export interface DagComparison {
  a: CompareDag;
  b: CompareDag;
  tasks: CompareRow[];
  /** Keys both runs have whose outputs differ. */
  outputsDiffering: number;
}

export interface CompareOptions {
  /** Cut each output's text to this many characters. Default: whole. */
  outputChars?: number;
}

export async function dagCompare(db: Db, aId: string, bId: string, opts: CompareOptions = {}): Promise<DagComparison> {
  if (opts.outputChars !== undefined && !(Number.isInteger(opts.outputChars) && opts.outputChars >= 0)) {
    throw new InvalidInputError(`output_chars must be a whole number of characters, 0 or more, got ${opts.outputChars}`, { field: 'output_chars' });
  }
  const [dagA, dagB] = [await dagGet(db, aId), await dagGet(db, bId)];
  if (!dagA) throw new NotFoundError('DAG', aId);
  if (!dagB) throw new NotFoundError('DAG', bId);
  const [rowsA, rowsB] = [ordered(await taskCompareRows(db, aId)), ordered(await taskCompareRows(db, bId))];
  const byKeyA = new Map(rowsA.map((r) => [r.key, r]));
  const byKeyB = new Map(rowsB.map((r) => [r.key, r]));
  const keys = [...byKeyA.keys(), ...rowsB.filter((r) => !byKeyA.has(r.key)).map((r) => r.key)];
  const tasks = keys.map((key): CompareRow => {
    const [ra, rb] = [byKeyA.get(key), byKeyB.get(key)];
    const sameOutput = !!ra && !!rb && ra.output !== null && rb.output !== null && canonicalJson(ra.output) === canonicalJson(rb.output);
    return { key, a: ra ? sideOf(ra, opts.outputChars) : null, b: rb ? sideOf(rb, opts.outputChars) : null, sameOutput };
  });
  return {
    a: dagOf(dagA, tasks.flatMap((t) => (t.a ? [t.a] : []))),
    b: dagOf(dagB, tasks.flatMap((t) => (t.b ? [t.b] : []))),
    tasks,
    outputsDiffering: tasks.filter((t) => t.a?.outputText != null && t.b?.outputText != null && !t.sameOutput).length,
  };
}

/** A DAG's tasks in the order `status` lists them: by creation, then key (naturally: w2 before w10). */
function ordered(rows: TaskCompareRow[]): TaskCompareRow[] {
  return rows.sort((x, y) => x.createdAt.getTime() - y.createdAt.getTime() || taskKeyCompare(x.key, y.key));
}

/** The output as text: a string as it is, anything else as indented JSON. */
function outputTextOf(output: unknown): string | null {
  if (output === null || output === undefined) return null;
  return typeof output === 'string' ? output : JSON.stringify(output, null, 2);
}

function sideOf(r: TaskCompareRow, outputChars: number | undefined): CompareSide {
  const full = outputTextOf(r.output);
  const cut = full !== null && outputChars !== undefined && full.length > outputChars;
  // Never half a surrogate pair at the cut.
  const text = cut ? textHead(full, outputChars) : full;
  return {
    taskId: r.id,
    status: r.status,
    reusedFrom: r.reusedFrom,
    model: r.model,
    outputText: text,
    outputLength: full?.length ?? 0,
    outputTruncated: cut,
    verdicts: (r.verdicts ?? []) as StepVerdict[],
    costUsd: r.unpricedReports > 0 ? null : r.costUsd,
    tokensIn: r.tokensIn,
    tokensOut: r.tokensOut,
    durationMs: r.durationMs,
    attempts: r.attempts,
  };
}

function dagOf(d: DagRow, sides: CompareSide[]): CompareDag {
  const sum = (f: (s: CompareSide) => number) => sides.reduce((n, s) => n + f(s), 0);
  return {
    id: d.id, name: d.name, status: d.status, createdAt: d.createdAt, completedAt: d.completedAt, rerunOf: d.rerunOf, rerunChange: d.rerunChange,
    totals: {
      tasks: sides.length,
      completed: sides.filter((s) => s.status === 'completed').length,
      reused: sides.filter((s) => s.reusedFrom !== null).length,
      costUsd: sum((s) => s.costUsd ?? 0),
      costUnknownTasks: sides.filter((s) => s.costUsd === null).length,
      tokensIn: sum((s) => s.tokensIn),
      tokensOut: sum((s) => s.tokensOut),
      durationMs: sum((s) => s.durationMs ?? 0),
      attempts: sum((s) => s.attempts),
      verdicts: sum((s) => s.verdicts.length),
      verdictsPassed: sum((s) => s.verdicts.filter((v) => v.pass).length),
    },
  };
}
