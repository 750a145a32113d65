import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { dateOf, rowsOf } from '../statement.js';
import type { RefusedRow } from '../rows.js';

/**
 * What a refused report is explained from: the task's row and the attempt under the reported fence. The guarded
 * statements return it for each report they did not apply (the completion's `refused` CTE, the failure's), so the
 * engine says why (engine/attempt/refusal.ts) without reading again; taskRefusalRead reads it alone, for a
 * statement whose snapshot showed a row that should have matched (it changed meanwhile) and for the statements
 * that do not return it.
 */

/**
 * True for a task whose completion must go through the validation engine: it
 * declares output validation steps, or it is a validation task (its output is a verdict).
 */
export function validationRequiredSql(alias: string): SQL {
  const t = sql.raw(alias);
  return sql`(${t}.validates_id is not null or ${t}.output_spec -> 'validation' is not null)`;
}

/**
 * The RefusedRow columns of task `t` (alias) and its attempt `a` (alias, left-joined on the reported fence).
 * `output`: the reported output as jsonb, compared as jsonb (key order and number spelling do not matter); a
 * validation task's output is its verdict as the engine completed it, what its agent sent is on the attempt
 * (details.reported). Without one, sameOutput is false.
 */
export function refusedRowColumns(t: string, a: string, output?: SQL): SQL {
  const T = sql.raw(t);
  const A = sql.raw(a);
  return sql`${T}.status, ${T}.fence, coalesce(${validationRequiredSql(t)}, false) as validated,
    ${A}.outcome, ${A}.error_class as "errorClass", ${A}.error_message as "errorMessage", ${T}.run_at as "runAt",
    coalesce(${A}.details ? 'reaped', false) as reaped,
    ${output ? sql`coalesce(${T}.output = ${output} or ${A}.details->'reported' = ${output}, false)` : sql`false`} as "sameOutput",
    (select jsonb_build_object('id', l.id, 'reason', l.reason, 'poisonPill', l.poison_pill) from dead_letters l
      where l.task_id = ${T}.id and ${T}.status = 'dead_lettered' order by l.created_at desc limit 1) as "deadLetter"`;
}

/** A RefusedRow as the driver returns it from JSON (jsonb_agg): its instant as a Date. */
export function refusedRowOf<R extends RefusedRow>(r: Omit<R, 'runAt'> & { runAt: string | Date | null }): R {
  return { ...r, runAt: dateOf(r.runAt) } as R;
}

/** The task's row and the attempt under `fence` as they stand now; null if there is no such task. */
export async function taskRefusalRead(db: Db, taskId: string, fence: number, output?: unknown): Promise<RefusedRow | null> {
  const [r] = await rowsOf<RefusedRow>(db, sql`
    select ${refusedRowColumns('t', 'a', output === undefined ? undefined : sql`${JSON.stringify(output ?? null)}::jsonb`)}
    from tasks t left join attempts a on a.task_id = t.id and a.fence = ${fence}
    where t.id = ${taskId}`);
  return r ? refusedRowOf(r) : null;
}
