import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import type { ClaimedRow } from '../rows.js';
import { attemptsPreviousFor, type PreviousAttempt } from './attempts.js';
import { dateOf, queryCompile, queryFill, rowsOfPreparedGeneric, textArray, type CompiledQuery } from '../statement.js';
import { agentCte } from './tasks-claim/agent.js';
import { admissionCtes, busyKeysCte, keysTakenCtes, rateReservedCtes, rateRoomCte } from './tasks-claim/admission.js';
import { budgetCtes } from './tasks-claim/budget.js';
import { brokeCte, groupsCte, pickedCte, tenantRoomCtes } from './tasks-claim/groups.js';
import { claimShapeOf, type ClaimParts, type ClaimSqlOptions } from './tasks-claim/shape.js';
import { agentClaimedCte, claimedCte, claimResultSql, tenantLoggedCte, tenantStampedCte } from './tasks-claim/update.js';

export type { ClaimedRow } from '../rows.js';
export type { ClaimSqlOptions } from './tasks-claim/shape.js';

export { PREVIOUS_ATTEMPTS_MAX, type PreviousAttempt } from './attempts.js';

/**
 * Claim up to `limit` READY tasks for one agent, in one statement.
 *
 * Claim groups: every task belongs to the group of its required capability set and
 * the models it accepts (`cap_key`), and tasks_ready_group_idx is ordered (cap_key,
 * effective_priority, ready_at, id). The claim reads the groups the agent covers
 * (its capabilities hold the group's; it has one of the group's models, or the group
 * names none) from the small capability_groups table, walks each group's index range in priority order
 * (a LATERAL subquery, FOR UPDATE SKIP LOCKED, at most `limit` rows), and merges
 * the heads. Tasks the agent cannot take are never visited, however many there
 * are and however urgent: a claim costs O(groups covered × limit), not O(READY).
 * The candidates are a CTE joined by the UPDATE, never `WHERE id IN (SELECT …
 * LIMIT n FOR UPDATE SKIP LOCKED)`: Postgres may re-run such a subquery and claim
 * more than `limit` rows.
 *
 * Concurrency: the agent holds at most max_concurrent tasks (claimed, running or
 * validating; a token's grant may lower it), counted under the agent row's lock. A
 * statement's snapshot is taken before it waits for that lock, so a claim of the same
 * agent that committed during the wait would be missed from the count: every claim that
 * takes tasks stamps the agent row (claim_writer), and a claim that finds a stamp its
 * snapshot does not see takes nothing and says so (`stale`); taskClaimReady then claims
 * again with the lock taken in a statement of its own first. Exact, and the common case
 * (no claim of the same agent in between) stays one statement.
 *
 * Budgets never over-commit. Each claimed task reserves its max_cost_usd against
 * the agent's budget and its DAG's ceiling (spent + reserved ≤ budget); the
 * attempt's end settles the real cost and releases the reservation.
 * - The agent: its row is locked first (FOR UPDATE, and re-read if it changed), so its
 *   remaining budget is exact for this statement; candidates are kept while their
 *   running sum of max costs fits.
 * - The DAG: the reservation is an UPDATE of the dags row guarded by
 *   spent + reserved + amount ≤ budget, which Postgres re-checks on the latest row
 *   version when claimers race; a DAG whose reservation fails contributes no task
 *   to this claim (its tasks stay READY for the next one).
 * Tasks without max_cost_usd reserve nothing and need only some budget left.
 * Each claim bumps the fencing token and starts the claim lease.
 */
/** When this process last saw READY tasks with a concurrency key, and how long it claims with the keys' steps after. */
let keyedSeenAt = 0;
const KEYED_MODE_MS = 10_000;
/** When this process last saw a claim's groups hold more than one tenant, and how long it claims in fair-share order after. */
let tenantsMixedSeenAt = 0;
const FAIR_MODE_MS = 60_000;

export async function taskClaimReady(
  db: Db, agentId: string, capabilities: readonly string[], limit: number, claimTtlSec: number, opts: ClaimSqlOptions = {},
): Promise<{ rows: ClaimedRow[]; previousAttempts: Map<string, PreviousAttempt[]>; agentActive: boolean }> {
  type Row = Omit<ClaimedRow, 'leaseExpiresAt'> & { leaseExpiresAt: string | Date; stale: boolean | null; keyedReady: boolean; tenantsMixed: boolean | null };
  // Fair-share order once some claim of this process met more than one tenant's work (a statement's shape is fixed:
  // the plain one merges the groups' heads by priority alone, which is cheaper and all one tenant needs).
  const fair = Date.now() - tenantsMixedSeenAt < FAIR_MODE_MS;
  const once = async (keyed: boolean, n: number): Promise<Row[]> => {
    const statement = queryFill(claimCompiled({ ...opts, keyed, fair }), {
      agentId, caps: [...capabilities], limit: n, claimTtlSec, budgetUsd: opts.grant?.budgetUsd ?? null, maxHeld: opts.grant?.maxHeld ?? null, dagId: opts.dagId ?? null,
      tenants: opts.grant?.tenants ? [...opts.grant.tenants] : null,
    });
    const got = await rowsOfPreparedGeneric<Row>(db, statement);
    // Another claim of this agent committed while this one waited for its row: claim again, counting after the lock.
    if (!got.some((r) => r.stale)) return got;
    return rowsOfPreparedGeneric<Row>(db, statement, { lockFirst: sql`select 1 from agents where id = ${agentId} for update` });
  };
  // Without READY tasks that carry a concurrency key (the usual case), the claim leaves the keys' steps out: a
  // shorter statement plans faster (custom plans; claim of 1 at 20,000 READY, p50 ~0.3 ms less). It skips keyed
  // tasks, and says whether any are READY; then the full statement claims the rest. Once keyed tasks were seen,
  // the process starts with the full statement for a while: the short one would walk past every keyed task.
  let rows: Row[];
  if (Date.now() - keyedSeenAt < KEYED_MODE_MS) {
    rows = await once(true, limit);
  } else {
    rows = await once(false, limit);
    const taken = rows.filter((r) => r.id !== null).length;
    if (rows[0]?.keyedReady) {
      keyedSeenAt = Date.now();
      if (taken < limit) rows = [...rows, ...(await once(true, limit - taken))];
    }
  }
  if (rows.some((r) => r.tenantsMixed)) tenantsMixedSeenAt = Date.now();
  // `stale` is null only when the statement found no active agent row (its agent CTE is empty).
  const agentActive = rows.some((r) => r.stale !== null);
  rows = rows.filter((r) => r.id !== null);
  // The rows as the driver built them, the lease's time set in place: a copy with a field added (a spread) left
  // objects V8 reads slowly, and the claimed task reads ~20 fields of each. Claim of 200, Node CPU per task:
  // 11.5-13.4 us with the copy, docs/benchmarks.md "Where a task's time goes".
  for (const r of rows) r.leaseExpiresAt = dateOf(r.leaseExpiresAt)!;
  // A retry's history, in a statement of its own: in the claim it cost every claim planning time (custom plans).
  return { rows: rows as ClaimedRow[], previousAttempts: await attemptsPreviousFor(db, rows), agentActive };
}

/** The claim statement itself, with its values, exposed so it can be EXPLAINed as it runs. */
export function taskClaimReadySql(agentId: string, capabilities: readonly string[], limit: number, claimTtlSec: number, opts: ClaimSqlOptions = {}): SQL {
  return claimSqlOf({
    agentId: sql`${agentId}`, caps: textArray(capabilities), limit: sql`${limit}`, claimTtlSec: sql`${claimTtlSec}`,
    budgetUsd: sql`${opts.grant?.budgetUsd ?? null}`, maxHeld: sql`${opts.grant?.maxHeld ?? null}`, dagId: sql`${opts.dagId ?? null}`,
    tenants: opts.grant?.tenants ? textArray(opts.grant.tenants) : sql`null::text[]`,
  }, opts);
}

/** The claim's shapes (which steps and clauses its text has), compiled once each: claims fill in their values. */
const claimShapes = new Map<string, CompiledQuery>();

/** The claim statement of `opts`'s shape, compiled once (taskClaimReady fills in its values with queryFill). */
export function claimCompiled(opts: ClaimSqlOptions): CompiledQuery {
  // Each part as the text tests it (claimSqlOf): a truthy `start` that is not `true` must not share `false`'s text.
  const shape = `${opts.keyed === true}:${Boolean(opts.start)}:${opts.grant?.budgetUsd != null}:${opts.grant?.maxHeld != null}:${Boolean(opts.dagId)}:${opts.fair === true}:${opts.grant?.tenants != null}`;
  let c = claimShapes.get(shape);
  if (!c) {
    const p = (name: string) => sql`${sql.placeholder(name)}`;
    c = queryCompile(claimSqlOf({
      agentId: p('agentId'), caps: sql`${sql.placeholder('caps')}::text[]`, limit: p('limit'), claimTtlSec: p('claimTtlSec'),
      budgetUsd: p('budgetUsd'), maxHeld: p('maxHeld'), dagId: p('dagId'), tenants: sql`${sql.placeholder('tenants')}::text[]`,
    }, opts));
    claimShapes.set(shape, c);
  }
  return c;
}

/**
 * The claim statement of one shape, from its parts (tasks-claim/): the agent, the groups it covers and the candidates
 * walked in them, the full statement's admission (concurrency keys, declared rate limits), the budgets, the UPDATE.
 */
function claimSqlOf(v: ClaimParts, opts: ClaimSqlOptions): SQL {
  const c = claimShapeOf(v, opts);
  const ctes = [
    c.keyed ? rateRoomCte() : undefined,
    agentCte(c),
    brokeCte(),
    c.keyed ? busyKeysCte() : undefined,
    groupsCte(c),
    tenantRoomCtes(),
    pickedCte(c),
    c.keyed ? admissionCtes() : undefined,
    budgetCtes(c),
    c.keyed ? keysTakenCtes() : undefined,
    agentClaimedCte(c),
    claimedCte(c),
    c.keyed ? rateReservedCtes() : undefined,
    tenantLoggedCte(),
    tenantStampedCte(),
  ].filter((x): x is SQL => x !== undefined);
  return sql`
    -- Times are clock_timestamp(): a claim took its tasks after the agent lock's wait, not when its transaction
    -- or its message began (now(), statement_timestamp()).
    with ${opts.fair ? sql`recursive ` : sql``}${sql.join(ctes, sql`,`)}
    ${claimResultSql(c)}`;
}
