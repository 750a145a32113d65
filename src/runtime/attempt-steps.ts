import { AsyncLocalStorage } from 'node:async_hooks';
import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import type { AttemptSpend } from '../db/rows.js';
import type { TaskRef } from '../engine/attempt/refusal.js';
import { stepNameCheck, stepRecord, stepReplay, type StepScope } from '../engine/attempt/steps.js';
import { InvalidInputError, LeaseLostError } from '../errors.js';
import { untilReachable } from './until-reachable.js';

/** ctx.step's options. */
export interface StepOptions {
  /**
   * `task` (default): recorded once for the task and replayed by every later attempt. `attempt`: run afresh in each
   * attempt; still recorded (with its attempt) for visibility, never replayed by another attempt.
   */
  scope?: StepScope;
}

/**
 * One attempt's durable steps (ctx.step): look the step up, replay it when recorded, else run it and record its
 * result under the attempt's fence (engine/attempt/steps.ts). What the handler reports spending while a step runs
 * (ctx.reportCost, in the step's async context) is recorded with the step, and charged with the attempt as always; a
 * replayed step charges nothing, and its replay is recorded with what it had cost (the attempt's replayed cost).
 */
export class AttemptSteps {
  private readonly used = new Set<string>();
  private readonly spendOfStep = new AsyncLocalStorage<Required<AttemptSpend>>();

  constructor(
    private readonly db: Db,
    private readonly ref: TaskRef,
    /** The attempt's logger (ctx.log): replays and failed steps are stored with the attempt. */
    private readonly attemptLog: () => Logger,
    /** The process log, for retries while the database is unreachable. */
    private readonly log: Logger,
    /** The step's write was refused as LEASE_LOST: abort the handler as a lost heartbeat does. */
    private readonly leaseLost: () => void,
    /** What cannot be stored as JSON in a step's result (task-run.ts jsonStorable), or the normalized value and its JSON. */
    private readonly storable: (value: unknown) => { value: unknown; json: string } | { error: string },
  ) {}

  /** Spend reported now: also the running step's, if it is reported from inside one. */
  reportCost(c: Required<AttemptSpend>): void {
    const step = this.spendOfStep.getStore();
    if (!step) return;
    step.costUsd += c.costUsd;
    step.tokensIn += c.tokensIn;
    step.tokensOut += c.tokensOut;
    if (c.model) step.model = c.model;
  }

  async run<T>(name: string, fn: () => Promise<T> | T, opts: StepOptions = {}): Promise<T> {
    stepNameCheck(name);
    if (typeof fn !== 'function') throw new InvalidInputError(`step ${JSON.stringify(name)}: fn must be a function returning the step's result`, { step: name });
    const scope = opts.scope ?? 'task';
    if (scope !== 'task' && scope !== 'attempt') throw new InvalidInputError(`step ${JSON.stringify(name)}: scope must be 'task' or 'attempt', not ${JSON.stringify(scope)}`, { step: name });
    if (this.used.has(name)) {
      throw new InvalidInputError(`step ${JSON.stringify(name)}: the name is already used in this attempt; each step of an attempt needs a name of its own`, { step: name });
    }
    this.used.add(name);
    if (scope === 'task') {
      const found = await this.leaseLostAware(name, () => untilReachable('step lookup', () => stepReplay(this.db, this.ref, name), this.log));
      if (found) {
        this.attemptLog().info({ step: name, recordedByAttempt: found.attempt, costUsd: found.costUsd }, 'step replayed');
        return found.result as T;
      }
    }
    const spend: Required<AttemptSpend> = { costUsd: 0, tokensIn: 0, tokensOut: 0, model: null };
    const startedAt = new Date();
    let value: T;
    try {
      value = await this.spendOfStep.run(spend, () => Promise.resolve().then(fn));
    } catch (err) {
      this.attemptLog().warn({ step: name, err }, 'step failed; nothing recorded');
      throw err;
    }
    const storable = this.storable(value);
    if ('error' in storable) throw new InvalidInputError(`step ${JSON.stringify(name)}: result cannot be stored as JSON: ${storable.error}; nothing was recorded`, { step: name });
    const r = await this.leaseLostAware(name, () => untilReachable('step record', () => stepRecord(this.db, {
      ...this.ref, name, scope, result: storable.value, resultJson: storable.json, durationMs: Date.now() - startedAt.getTime(), startedAt, ...spend,
    }), this.log));
    // Recorded meanwhile by another write of the same name (first write wins): that result is the step's.
    return (r.recorded ? storable.value : r.step.result) as T;
  }

  /** A lookup or record refused as LEASE_LOST: the task is no longer this attempt's, so the handler is abandoned. */
  private async leaseLostAware<R>(name: string, fn: () => Promise<R>): Promise<R> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof LeaseLostError) {
        this.log.warn({ step: name, err: err.message }, 'step refused: the lease was lost; abandoning the task');
        this.leaseLost();
      }
      throw err;
    }
  }
}
