import { sql, type SQL } from 'drizzle-orm';

/**
 * Effective priority (lower = more urgent), the claim's order:
 *
 *   effective = clamp(base − age − deadline − critical_path, min, max)
 *   age           = min(ageCap, boost_per_minute × minutes READY)
 *   deadline      = deadlineMax × exp(−seconds left / deadlineScaleSec), deadlineMax once passed, 0 without one
 *   critical_path = cpMax × rank / (rank + cpScaleSec), rank = the task's upward rank in seconds
 *
 * The constants are documented with worked examples in docs/priority.md. They are
 * process settings: every process that moves tasks to READY must use the same ones
 * (the benchmark switches the critical path off to measure FIFO).
 */
export interface PriorityConstants {
  /** Most the age term can take off: enough to bring a background task (100) to the top (0). */
  ageCap: number;
  deadlineMax: number;
  /** Seconds left at which the deadline term is deadlineMax / e. */
  deadlineScaleSec: number;
  cpMax: number;
  /** Upward rank (seconds) at which the critical-path term is half of cpMax. */
  cpScaleSec: number;
  min: number;
  max: number;
  /** Run time assumed for a task type with no declared estimate and too few completed attempts to learn from. */
  defaultEstimateSec: number;
  /** Completed attempts of a type needed before their median replaces the default. */
  minSamples: number;
}

export const PRIORITY_DEFAULTS: Readonly<PriorityConstants> = Object.freeze({
  ageCap: 100,
  deadlineMax: 40,
  deadlineScaleSec: 3600,
  cpMax: 30,
  cpScaleSec: 3600,
  min: -100,
  max: 100,
  defaultEstimateSec: 60,
  minSamples: 3,
});

let current: PriorityConstants = { ...PRIORITY_DEFAULTS };

export function priorityConstants(): Readonly<PriorityConstants> {
  return current;
}

/** Change the constants for this process (tests and benchmarks); returns the previous ones. */
export function priorityConfigure(next: Partial<PriorityConstants>): PriorityConstants {
  const before = current;
  current = { ...current, ...next };
  return before;
}

export interface PriorityInputs {
  priority: number;
  boostPerMinute: number;
  /** Seconds the task has been READY (0 when it just became ready). */
  readySec: number;
  /** Seconds until the deadline (negative once passed), null without one. */
  deadlineInSec: number | null;
  cpRankSec: number;
}

/** The formula in TypeScript: what the SQL below computes, for docs, tests and the scheduling simulation. */
export function effectivePriority(i: PriorityInputs, c: PriorityConstants = current): number {
  const age = Math.min(c.ageCap, i.boostPerMinute * Math.max(0, i.readySec) / 60);
  const deadline = i.deadlineInSec === null ? 0 : i.deadlineInSec <= 0 ? c.deadlineMax : c.deadlineMax * Math.exp(-i.deadlineInSec / c.deadlineScaleSec);
  const cp = c.cpMax * i.cpRankSec / (i.cpRankSec + c.cpScaleSec);
  return Math.min(c.max, Math.max(c.min, i.priority - age - deadline - cp));
}

/** Minutes a READY task of base `low` waits before it overtakes fresh tasks of base `high` (equal deadlines and ranks). */
export function overtakeMinutes(low: number, high: number, boostPerMinute: number): number {
  return boostPerMinute > 0 ? (low - high) / boostPerMinute : Infinity;
}

/**
 * The formula as SQL over a tasks row (columns unqualified, or prefixed by `alias`),
 * at the instant `at` (default the database clock). `fresh` computes it for a task
 * that becomes READY in this statement: its age is zero.
 */
export function effectivePrioritySql(opts: { at?: SQL; alias?: string; fresh?: boolean } = {}): SQL {
  const c = current;
  const col = (name: string) => sql.raw(opts.alias ? `${opts.alias}.${name}` : name);
  const now = opts.at ?? sql`now()`;
  const age = opts.fresh ? sql`0`
    : sql`least(${c.ageCap}::float8, ${col('boost_per_minute')} * greatest(0, extract(epoch from (${now} - ${col('ready_at')}))) / 60)`;
  // least(700, …): exp() of a large negative number raises an underflow error in PostgreSQL.
  const deadline = sql`case when ${col('deadline')} is null then 0
      when ${col('deadline')} <= ${now} then ${c.deadlineMax}::float8
      else ${c.deadlineMax}::float8 * exp(-least(700, extract(epoch from (${col('deadline')} - ${now})) / ${c.deadlineScaleSec}::float8)) end`;
  const cp = sql`${c.cpMax}::float8 * ${col('cp_rank_sec')} / (${col('cp_rank_sec')} + ${c.cpScaleSec}::float8)`;
  return sql`greatest(${c.min}::float8, least(${c.max}::float8, ${col('priority')} - ${age} - ${deadline} - ${cp}))`;
}

/** `effective_priority = …` for a statement that may move a task to READY (age zero). */
export function effectivePriorityOnReadySql(alias?: string): SQL {
  return sql`effective_priority = ${effectivePrioritySql({ fresh: true, alias })}`;
}
