import { nanoid } from 'nanoid';
import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import type { AttemptSpend } from '../db/rows.js';
import type { TaskRef } from '../engine/attempt/refusal.js';
import { usageBudget, usageCheck, usageReport, type UsageAnswer } from '../engine/attempt/usage.js';
import type { LimitReached } from '../engine/attempt/usage-limits.js';
import { USAGE_DEFAULTS } from '../config/index.js';
import { BudgetExceededError, LeaseLostError } from '../errors.js';
import { untilReachable } from './until-reachable.js';

/** What ctx.reportCost resolves with once its report is durable. */
export interface BudgetView {
  /** The attempt's usage charged so far (this report included). */
  attempt: { costUsd: number; tokensIn: number; tokensOut: number };
  /** USD left before the first limit holding the attempt (its max_cost_usd, its DAG's or its agent's budget or daily cap, its token's grant); null: none. */
  remainingUsd: number | null;
  /** Tokens (in + out) left under the task's max_tokens; null: none. */
  remainingTokens: number | null;
  /** The first limit the attempt has spent 80 % (its DAG's budget_low_at) or more of, none passed: time to wrap up (ctx.onBudgetLow). */
  low: LimitReached | null;
  /** The limit this report reached: the attempt was stopped (ctx.signal aborted, reason budget_exceeded). */
  stopped: LimitReached | null;
}

/**
 * One report as the handler makes it: an attempt's spend, with the input tokens read from and written to the
 * provider's cache; `costUsd` null when the handler had no price for the model (cost unknown).
 */
export type UsageSpend = Omit<Required<AttemptSpend>, 'costUsd'> & { costUsd: number | null; cachedReadTokens: number; cacheWriteTokens: number };

/** What a call is expected to cost, asked before it (ctx.budgetFits): USD, tokens (in + out), or both. */
export type CallEstimate = number | { usd?: number; tokens?: number };

interface Batch { spend: UsageSpend; waiters: Array<(v: BudgetView | null) => void> }

/**
 * One attempt's usage reports (ctx.reportCost), written while the attempt runs: reports within
 * USAGE_DEFAULTS.batchMs go as one statement per model, one batch in flight at a time, each under its own report key
 * so a retry after a lost reply is charged once (engine/attempt/usage.ts). A report that reaches a limit stops the
 * attempt (the engine has failed it with class budget_exceeded). The attempt's end flushes what is pending first,
 * so its end report carries nothing already charged.
 */
export class AttemptUsage {
  private readonly keyPrefix = nanoid(12);
  private seq = 0;
  /** By model and whether the cost is known: an unknown cost is never added to a known one. */
  private pending = new Map<string, Batch>();
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> = Promise.resolve();
  /** What was charged so far, as the last answer said. */
  private last: BudgetView = { attempt: { costUsd: 0, tokensIn: 0, tokensOut: 0 }, remainingUsd: null, remainingTokens: null, low: null, stopped: null };
  /** ctx.onBudgetLow's listeners: called once, at the first answer that says low. */
  private readonly lowListeners: Array<(v: BudgetView) => void> = [];
  private lowSaid = false;
  /** The task is no longer this attempt's (a refused report): nothing more is sent. */
  private gone = false;

  constructor(
    private readonly db: Db,
    private readonly ref: TaskRef,
    /** This process's agent: a report its attempt makes after the attempt ended is still charged to it (late). */
    private readonly agentId: string,
    private readonly log: Logger,
    /** A report reached a limit: the attempt was stopped. */
    private readonly stopped: (limit: LimitReached) => void,
    /** A report was refused as LEASE_LOST: the task is no longer this attempt's. */
    private readonly leaseLost: () => void,
  ) {}

  /** Add a report; resolves with the budget once it is durable (null when the task was no longer this attempt's). */
  report(spend: UsageSpend): Promise<BudgetView | null> {
    // A negative, non-finite or huge figure is the handler's bug: an error at its call, never a batch refused later.
    usageCheck({ reportKey: 'check', ...spend });
    if (this.gone) return Promise.resolve(this.last.stopped ? this.last : null);
    const key = `${spend.costUsd === null ? 'unknown' : 'priced'}:${spend.model ?? ''}`;
    let batch = this.pending.get(key);
    if (!batch) {
      const cost = spend.costUsd === null ? null : 0;
      this.pending.set(key, batch = { spend: { costUsd: cost, tokensIn: 0, tokensOut: 0, cachedReadTokens: 0, cacheWriteTokens: 0, model: spend.model }, waiters: [] });
    }
    if (batch.spend.costUsd !== null) batch.spend.costUsd += spend.costUsd ?? 0;
    batch.spend.tokensIn += spend.tokensIn;
    batch.spend.tokensOut += spend.tokensOut;
    batch.spend.cachedReadTokens += spend.cachedReadTokens;
    batch.spend.cacheWriteTokens += spend.cacheWriteTokens;
    const answered = new Promise<BudgetView | null>((resolve) => batch.waiters.push(resolve));
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.sending = this.sending.then(() => this.send());
    }, USAGE_DEFAULTS.batchMs);
    return answered;
  }

  /** The budget as the last report's answer or budget read (fits) said (neither yet: no limits known). */
  get view(): BudgetView {
    return this.last;
  }

  /** Call `f` once when an answer first says the attempt is low on a limit (at once if one has). */
  onLow(f: (v: BudgetView) => void): void {
    if (this.lowSaid) f(this.last);
    else this.lowListeners.push(f);
  }

  /**
   * Whether a call estimated to cost `estimateUsd` fits under every limit holding the attempt, with what is
   * reported so far charged first: asked before the call, so a runaway stops before the call that would pass its
   * limit, not after it. False once the attempt was stopped or lost.
   */
  async fits(estimate: CallEstimate): Promise<boolean> {
    const { usd, tokens } = typeof estimate === 'number' ? { usd: estimate, tokens: 0 } : { usd: estimate.usd ?? 0, tokens: estimate.tokens ?? 0 };
    usageCheck({ reportKey: 'check', costUsd: usd, tokensIn: tokens });
    await this.flush();
    if (this.gone) return false;
    try {
      const b = await untilReachable('budget read', () => usageBudget(this.db, this.ref), this.log);
      // Fresher than the last report's answer: ctx.budget says what was read, so a handler that stops can say what is left.
      this.last = { ...this.last, attempt: b.attempt, remainingUsd: b.remainingUsd, remainingTokens: b.remainingTokens };
      return (b.remainingUsd === null || usd <= b.remainingUsd + 1e-9) && (b.remainingTokens === null || tokens <= b.remainingTokens);
    } catch (err) {
      if (err instanceof LeaseLostError) {
        this.gone = true;
        this.leaseLost();
        return false;
      }
      throw err;
    }
  }

  /** Send what is pending now and wait for every report under way: before the attempt's end is reported. */
  async flush(): Promise<BudgetView> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.sending = this.sending.then(() => this.send());
    await this.sending;
    return this.last;
  }

  private async send(): Promise<void> {
    const batches = [...this.pending.values()];
    this.pending = new Map();
    for (const b of batches) {
      const hasUsage = b.spend.costUsd !== 0 || b.spend.tokensIn > 0 || b.spend.tokensOut > 0;
      // Once stopped, later reports answer the stop; once the task is gone otherwise, nothing.
      const view = !this.gone && hasUsage ? await this.sendOne(b.spend) : this.gone && !this.last.stopped ? null : this.last;
      for (const w of b.waiters) w(view);
    }
  }

  private async sendOne(spend: UsageSpend): Promise<BudgetView | null> {
    const reportKey = `${this.keyPrefix}:${++this.seq}`;
    let a: UsageAnswer;
    try {
      a = await untilReachable('usage report', () => usageReport(this.db, this.ref, {
        reportKey, ...spend,
      }, { log: this.log, agentId: this.agentId }), this.log);
    } catch (err) {
      if (err instanceof LeaseLostError) {
        this.gone = true;
        if (err.details.lateCharged) this.log.warn({ err: err.message, costUsd: spend.costUsd }, 'usage charged to the attempt that ended: the task is no longer this attempt\'s');
        else this.log.warn({ err: err.message, costUsd: spend.costUsd }, 'usage not recorded: the task is no longer this attempt\'s');
        this.leaseLost();
        return null;
      }
      if (err instanceof BudgetExceededError) {
        // Stopped at a limit by another report of this attempt (a retry of the one whose answer was lost).
        this.gone = true;
        const stop = err.details as unknown as LimitReached;
        this.last = { ...this.last, low: null, stopped: stop };
        this.stopped(stop);
        return this.last;
      }
      this.log.error({ err, costUsd: spend.costUsd }, 'usage report refused');
      return null;
    }
    this.last = { attempt: a.attempt, remainingUsd: a.remainingUsd, remainingTokens: a.remainingTokens, low: a.low, stopped: a.stopped };
    if (a.low && !this.lowSaid) {
      this.lowSaid = true;
      for (const f of this.lowListeners) {
        try {
          f(this.last);
        } catch (err) {
          this.log.warn({ err }, 'an onBudgetLow listener threw');
        }
      }
    }
    if (a.stopped) {
      this.gone = true;
      this.log.warn({ limit: a.stopped }, 'spend limit reached: the attempt was stopped');
      this.stopped(a.stopped);
    }
    return this.last;
  }
}
