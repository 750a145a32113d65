import { sql, type SQL } from 'drizzle-orm';

/** What a claim asks for, besides its agent, capabilities, limit and claim TTL: what sets its statement's shape. */
export interface ClaimSqlOptions {
  /** Only tasks of this DAG. */
  dagId?: string;
  /**
   * Claim straight into RUNNING, under the heartbeat lease (three of the task's heartbeat_sec): for a claimer that
   * starts everything it claims at once, which saves the start statement. Default false: CLAIMED, under the claim TTL.
   */
  start?: boolean;
  /**
   * Ceilings from the caller's token grant, over what the agent row says (a registration made before
   * the grant, an operator's): the agent holds at most `maxHeld` tasks at once, spends at most `budgetUsd`, and takes
   * work of `tenants` only (null: whatever tenants its row serves).
   */
  grant?: { maxHeld: number | null; budgetUsd: number | null; tenants?: readonly string[] | null };
  /** The statement with the concurrency keys' steps (taskClaimReady chooses). Default false: keyed tasks are skipped. */
  keyed?: boolean;
  /**
   * The statement that serves tenants in fair-share order (taskClaimReady chooses, once a claim's groups held more than
   * one tenant). Default false: the groups' heads merged in priority order, whatever their tenant.
   */
  fair?: boolean;
}

/** What varies between claims of one shape: values, or placeholders in the compiled statement. */
export interface ClaimParts { agentId: SQL; caps: SQL; limit: SQL; claimTtlSec: SQL; budgetUsd: SQL; maxHeld: SQL; dagId: SQL; tenants: SQL }

/** One claim statement's shape, as its CTE builders read it. */
export interface ClaimShape {
  v: ClaimParts;
  opts: ClaimSqlOptions;
  /** The full statement: concurrency keys and declared rate limits. */
  keyed: boolean;
  /** The CTE the budgets' step reads candidates from: `admitted` past the keys and limits, else `picked`. */
  candidates: SQL;
}

export function claimShapeOf(v: ClaimParts, opts: ClaimSqlOptions): ClaimShape {
  const keyed = opts.keyed === true;
  return { v, opts, keyed, candidates: keyed ? sql`admitted` : sql`picked` };
}

/** The claim order of rows aliased `a`: the index's order (tasks_ready_group_idx). */
export function inOrder(a: string): SQL {
  return sql.raw(`${a}.effective_priority, ${a}.ready_at, ${a}.id`);
}
