import type { Logger } from 'pino';
import type { Db } from '../../db/handle.js';
import { usageBudgetGet, usageReport as usageReportStatement, type UsageLimits } from '../../db/queries/usage.js';
import { USAGE_DEFAULTS } from '../../config/index.js';
import { LIMITS } from '../../config/limits.js';
import { BudgetExceededError, DagentError, ForbiddenError, InvalidInputError, LeaseLostError } from '../../errors.js';
import { usageReportLate } from '../../db/queries/usage-late.js';
import { BUDGET_EXCEEDED_CLASS } from './retry-policy.js';
import { taskFail } from './fail.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { holdRefusalRead, type TaskRef } from './refusal.js';
import { limitText, type LimitReached } from './usage-limits.js';


/**
 * Usage reported while an attempt runs, charged at once (db/queries/usage.ts) and held to the attempt's limits on
 * every report: the task's max_cost_usd, the DAG's budget, the agent's budget. A report that takes the attempt past
 * one is charged (the money was spent) and stops the attempt: it fails with class budget_exceeded (dead-lettered
 * unless the DAG's retry_on names it), so its lease is gone and every later report or step write of it is refused
 * (BUDGET_EXCEEDED, naming the limit).
 * The TypeScript runtime (ctx.reportCost) and POST /api/tasks/:id/usage both come through here.
 */

/** One usage report, as an agent sends it. */
export interface UsageReportInput {
  /** The reporter's id for this report (a retry of it after a lost reply sends the same). */
  reportKey: string;
  /** USD spent since the last report (omitted: 0); null: cost unknown (no price for the model), never taken as 0 in reports. */
  costUsd?: number | null;
  tokensIn?: number;
  tokensOut?: number;
  cachedReadTokens?: number;
  cacheWriteTokens?: number;
  model?: string | null;
  tokenId?: string | null;
}

/** What a report answers: the attempt's usage so far, and what is left under each limit it is held to. */
export interface UsageAnswer {
  /** False: this report key was applied before (a repeat after a lost reply); nothing was charged again. */
  applied: boolean;
  attempt: { costUsd: number; tokensIn: number; tokensOut: number };
  /** What is left before the first limit (USD; null: no limit holds the attempt). */
  remainingUsd: number | null;
  /** Tokens (in + out) left under the task's max_tokens (null: none). */
  remainingTokens: number | null;
  /** The first limit the attempt has spent its DAG's budget_low_at (default USAGE_DEFAULTS.lowAt, 80 %) of or more, none passed: time to wrap up. */
  low: LimitReached | null;
  /** Set when this report reached a limit: the attempt was stopped (failed with class budget_exceeded). */
  stopped: LimitReached | null;
}

const REPORT_KEY_MAX = 128;

/** The report's numbers, checked: a negative, fractional token, non-finite or huge value is a clear error naming the field. */
export function usageCheck(u: UsageReportInput): Required<Omit<UsageReportInput, 'model' | 'tokenId' | 'costUsd'>> & { costUsd: number | null } {
  if (typeof u.reportKey !== 'string' || u.reportKey.length === 0 || u.reportKey.length > REPORT_KEY_MAX || /\p{Cc}/u.test(u.reportKey)) {
    throw new InvalidInputError(`report_key: 1-${REPORT_KEY_MAX} printable characters`, { field: 'report_key' });
  }
  const usd = u.costUsd === undefined ? 0 : u.costUsd;
  if (usd !== null && (typeof usd !== 'number' || !Number.isFinite(usd) || usd < 0 || usd > LIMITS.reportCostUsd)) {
    throw new InvalidInputError(`cost_usd ${usd}: expected a number from 0 to ${LIMITS.reportCostUsd}`, { field: 'cost_usd' });
  }
  const tokens = (field: string, v: number | undefined) => {
    const n = v ?? 0;
    if (!Number.isInteger(n) || n < 0 || n > LIMITS.reportTokens) throw new InvalidInputError(`${field} ${n}: expected a whole number from 0 to ${LIMITS.reportTokens}`, { field });
    return n;
  };
  return {
    reportKey: u.reportKey, costUsd: usd, tokensIn: tokens('tokens_in', u.tokensIn), tokensOut: tokens('tokens_out', u.tokensOut),
    cachedReadTokens: tokens('cached_read_tokens', u.cachedReadTokens), cacheWriteTokens: tokens('cache_write_tokens', u.cacheWriteTokens),
  };
}

/**
 * Write and charge one usage report of the holder `ref`, then hold the attempt to its limits. LEASE_LOST (NOT_FOUND
 * for no such task) when the fence no longer holds the task: nothing is written.
 */
export async function usageReport(db: Db, ref: TaskRef, input: UsageReportInput, opts: { log?: Logger; agentId?: string | null } = {}): Promise<UsageAnswer> {
  const u = usageCheck(input);
  const r = await usageReportStatement(db, { taskId: ref.taskId, fence: ref.fence, ...u, model: input.model ?? null, tokenId: input.tokenId ?? null });
  if (r.kind === 'refused') {
    const refusal = await holdRefusalRead(db, ref, r.task);
    throw opts.agentId ? await usageLateCharge(db, ref, input, opts.agentId, refusal) : refusal;
  }
  const { stopped, low, remainingUsd, remainingTokens } = budgetOf(r);
  if (stopped) {
    const message = `${limitText(stopped)}; the attempt was stopped`;
    // Its own event (webhooks may subscribe to it), beside the failure's: which limit stopped which attempt.
    await eventInsertMany(db, [{ type: 'task.budget_exceeded', dagId: r.dagId, taskId: ref.taskId, agentId: r.agentId, data: { ...stopped, fence: ref.fence } }]);
    await taskFail(db, { taskId: ref.taskId, fence: ref.fence, errorClass: BUDGET_EXCEEDED_CLASS, message, details: { budget: stopped } }, { log: opts.log })
      .catch((err: unknown) => {
        // Ended meanwhile by something else (its completion, the reaper): the report stands, the stop has nothing to stop.
        if (!(err instanceof LeaseLostError)) throw err;
      });
  }
  return {
    applied: r.applied, attempt: { costUsd: r.attemptCostUsd, tokensIn: r.attemptTokensIn, tokensOut: r.attemptTokensOut },
    remainingUsd, remainingTokens, low, stopped,
  };
}


/**
 * A report refused because its attempt is over (LEASE_LOST: the reaper took a lapsed lease back; BUDGET_EXCEEDED: a
 * limit stopped it) while a call it paid for was under way: charged all the same to that attempt when it was
 * `agentId`'s and ended at most USAGE_DEFAULTS.lateReportSec ago (db/queries/usage-late.ts), for the money was
 * spent. The refusal stands (the attempt is over: do no more work on it) and says the report was charged
 * (`details.lateCharged`). Anything else (no such task, another agent's attempt, too late) is the refusal as it was.
 */
export async function usageLateCharge(db: Db, ref: TaskRef, input: UsageReportInput, agentId: string, refusal: DagentError): Promise<DagentError> {
  if (!(refusal instanceof LeaseLostError || refusal instanceof BudgetExceededError || refusal instanceof ForbiddenError)) return refusal;
  const u = usageCheck(input);
  const r = await usageReportLate(db, {
    taskId: ref.taskId, fence: ref.fence, ...u, model: input.model ?? null, tokenId: input.tokenId ?? null, agentId, windowSec: USAGE_DEFAULTS.lateReportSec,
  });
  if (r.kind === 'none') return refusal;
  // The same refusal (its class and code: a runtime tells a lost lease from a stop by them), saying what was charged.
  refusal.message = `${refusal.message}; this report was charged to the attempt that ended (it was spent)`;
  Object.assign(refusal.details, { lateCharged: { applied: r.applied, attempt: r.attempt } });
  return refusal;
}

/**
 * Where the holder `ref` stands against its limits now, without reporting anything: before a call, to ask whether
 * a call of an estimated cost fits (ctx.budgetFits, GET /api/tasks/:id/budget). LEASE_LOST as a report is.
 */
export async function usageBudget(db: Db, ref: TaskRef, opts: { tokenId?: string | null } = {}): Promise<Omit<UsageAnswer, 'applied' | 'stopped'>> {
  const r = await usageBudgetGet(db, ref.taskId, ref.fence, opts.tokenId ?? null);
  if (r.kind === 'refused') throw await holdRefusalRead(db, ref, r.task);
  const { low, remainingUsd, remainingTokens } = budgetOf(r);
  return { attempt: { costUsd: r.attemptCostUsd, tokensIn: r.attemptTokensIn, tokensOut: r.attemptTokensOut }, remainingUsd, remainingTokens, low };
}

/** The limits holding an attempt, as its row, its DAG's, its agent's and its token's say: the first one passed, the first one low, what is left. */
function budgetOf(r: UsageLimits): { stopped: LimitReached | null; low: LimitReached | null; remainingUsd: number | null; remainingTokens: number | null } {
  const tokensSpent = r.attemptTokensIn + r.attemptTokensOut;
  // In USAGE_LIMITS' order (the first one passed is the one named); a limit that is null holds nothing.
  const candidates: Array<LimitReached | null> = [
    r.maxCostUsd === null ? null : { limit: 'task.max_cost_usd', limitUsd: r.maxCostUsd, spentUsd: r.attemptCostUsd },
    r.maxTokens === null ? null : { limit: 'task.max_tokens', limitTokens: r.maxTokens, spentTokens: tokensSpent },
    r.dagBudgetUsd === null ? null : { limit: 'dag.budget_usd', limitUsd: r.dagBudgetUsd, spentUsd: r.dagSpentUsd },
    r.dagDailyUsd === null ? null : { limit: 'dag.daily_budget_usd', limitUsd: r.dagDailyUsd, spentUsd: r.dagTodayUsd },
    r.agentBudgetUsd === null ? null : { limit: 'agent.budget_usd', limitUsd: r.agentBudgetUsd, spentUsd: r.agentSpentUsd },
    r.agentDailyUsd === null ? null : { limit: 'agent.daily_budget_usd', limitUsd: r.agentDailyUsd, spentUsd: r.agentTodayUsd },
    // The grant is a ceiling on the agent's budget (what its token lets it spend), held against the agent's spend.
    r.grantBudgetUsd === null ? null : { limit: 'token.grant_budget_usd', limitUsd: r.grantBudgetUsd, spentUsd: r.agentSpentUsd },
  ];
  const limits = candidates.filter((l): l is LimitReached => l !== null);
  const usd = limits.filter((l): l is Extract<LimitReached, { limitUsd: number }> => 'limitUsd' in l);
  const share = (l: LimitReached) => ('limitTokens' in l ? [l.spentTokens, l.limitTokens] : [l.spentUsd, l.limitUsd]) as [number, number];
  // Past a limit, not at it: an attempt may spend exactly its max_cost_usd.
  const stopped = limits.find((l) => { const [spent, limit] = share(l); return spent > limit + 1e-9; }) ?? null;
  const lowAt = r.lowAt ?? USAGE_DEFAULTS.lowAt;
  const low = stopped ? null : limits.find((l) => { const [spent, limit] = share(l); return spent >= limit * lowAt - 1e-9; }) ?? null;
  // Rounded to a billionth of a dollar: the difference of two decimals read as doubles carries binary noise.
  const remainingUsd = usd.length ? Math.max(0, Math.round(Math.min(...usd.map((l) => l.limitUsd - l.spentUsd)) * 1e9) / 1e9) : null;
  const remainingTokens = r.maxTokens === null ? null : Math.max(0, r.maxTokens - tokensSpent);
  return { stopped, low, remainingUsd, remainingTokens };
}
