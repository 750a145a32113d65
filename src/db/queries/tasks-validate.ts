import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { fromStates } from '../../model/state-machine.js';
import { rowsOf, textArray } from '../statement.js';
import { spendSettleCtes, spendSql } from './spend.js';
import type { AttemptSpend } from '../rows.js';
import { usageOfAttemptSql } from './usage.js';

/** What settling an output needs to know about its task. */
export interface OutputTaskRow {
  id: string;
  dagId: string;
  key: string;
  type: string;
  title: string | null;
  status: string;
  fence: number;
  attempt: number;
  priority: number;
  spec: Record<string, unknown>;
  outputSpec: Record<string, unknown> | null;
  output: unknown;
  claimedBy: string | null;
  reservedUsd: number;
  validatesId: string | null;
  validatesFence: number | null;
  validationStep: number | null;
  /** Its DAG's tenant: a validation task of it is the tenant's too. */
  tenantId: string;
}

const outputTaskColumns = sql`
  id, dag_id as "dagId", key, type, title, status, fence, attempts as "attempt", priority, spec, output_spec as "outputSpec", output,
  claimed_by as "claimedBy", reserved_usd::float8 as "reservedUsd", validates_id as "validatesId", validates_fence as "validatesFence", validation_step as "validationStep",
  tenant_id as "tenantId"`;

/** Lock a task its agent holds (claimed or running) under this fence, to submit its output. Null if the guard fails. */
export async function taskLockForOutput(db: Db, id: string, fence: number, states: readonly string[] = fromStates('submitOutput')): Promise<OutputTaskRow | null> {
  const [r] = await rowsOf<OutputTaskRow>(db, sql`
    select ${outputTaskColumns} from tasks
    where id = ${id} and fence = ${fence} and status = any(${textArray(states)})
    for update`);
  return r ?? null;
}

/** Lock a VALIDATING task, as of the attempt (fence) whose output is under validation. Null if it moved on (cancelled, say). */
export async function taskLockValidating(db: Db, id: string, fence: number): Promise<OutputTaskRow | null> {
  const [r] = await rowsOf<OutputTaskRow>(db, sql`
    select ${outputTaskColumns} from tasks where id = ${id} and fence = ${fence} and status = 'validating'
    for update`);
  return r ?? null;
}

/**
 * leased → validating: keep the submitted output, drop the lease (the validation
 * task holds its own), charge what the attempt spent, and record the attempt as
 * `validating`; the verdict later rewrites its outcome.
 */
export async function taskOutputSubmit(
  db: Db, t: { id: string; fence: number; output: unknown; step: number; spent: AttemptSpend; reservedUsd: number },
): Promise<boolean> {
  const { cost, tokensIn, tokensOut } = spendSql(t.spent);
  const rows = await rowsOf(db, sql`
    with submitted as (
      update tasks t set status = 'validating', output = ${JSON.stringify(t.output ?? null)}::jsonb, validation_step = ${t.step},
        lease_expires_at = null, updated_at = now(), reserved_usd = 0,
        cost_usd = t.cost_usd + ${cost}, tokens_in = t.tokens_in + ${tokensIn}, tokens_out = t.tokens_out + ${tokensOut}
      where t.id = ${t.id} and t.fence = ${t.fence} and t.status = any(${textArray(fromStates('submitOutput'))})
      returning t.*
    ),
    recorded as (
      insert into attempts (task_id, dag_id, attempt, fence, agent_id, outcome, started_at, ended_at, duration_ms, cost_usd, tokens_in, tokens_out, model, details)
      select id, dag_id, attempts, fence, claimed_by, 'validating', claimed_at, now(),
             (extract(epoch from now() - claimed_at) * 1000)::int, ${cost} + ${usageOfAttemptSql('submitted').cost}, ${tokensIn} + ${usageOfAttemptSql('submitted').tokensIn}, ${tokensOut} + ${usageOfAttemptSql('submitted').tokensOut}, ${t.spent.model ?? null}, '{"verdicts": []}'::jsonb
      from submitted
    ),
    -- The agent's attempt ends here: its reservation is released now (the row's is zeroed, so the verdict releases nothing).
    ${spendSettleCtes('submitted', cost, sql`${t.reservedUsd}::numeric`)}
    select id from submitted`);
  return rows.length > 0;
}

/** A VALIDATING task moves on to its next delegated step. */
export async function taskValidationStepSet(db: Db, id: string, fence: number, step: number): Promise<void> {
  await db.execute(sql`update tasks set validation_step = ${step}, updated_at = now() where id = ${id} and fence = ${fence} and status = 'validating'`);
}

/** Add verdicts to the history of the attempt they judged (attempts.details.verdicts); creates the row's details if needed. */
export async function attemptVerdictsAppend(db: Db, taskId: string, fence: number, verdicts: unknown[]): Promise<void> {
  if (verdicts.length === 0) return;
  await db.execute(sql`
    update attempts set details = jsonb_set(coalesce(details, '{}'::jsonb), '{verdicts}',
      coalesce(details->'verdicts', '[]'::jsonb) || ${JSON.stringify(verdicts)}::jsonb)
    where task_id = ${taskId} and fence = ${fence}`);
}
