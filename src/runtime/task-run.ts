import { context } from '@opentelemetry/api';
import { traceparentContext } from '../observability/trace-ids.js';
import type { Logger } from 'pino';
import { LEASE_DEFAULTS } from '../config/index.js';
import { errorMessage, isConnectionLost } from '../db/pg-errors.js';
import type { Db } from '../db/handle.js';
import type { ClaimedTask } from '../engine/attempt/claim.js';
import { outputProblem } from '../engine/attempt/completion-write.js';
import { taskFail } from '../engine/attempt/fail.js';
import type { TaskRef } from '../engine/attempt/refusal.js';
import { taskHeartbeat, taskStart } from '../engine/attempt/lease.js';
import { taskRelease } from '../engine/attempt/release.js';
import { taskSpawn } from '../engine/dag/spawn.js';
import { DagentError, LeaseLostError } from '../errors.js';
import type { AgentDefinition, TaskContext } from './define-agent.js';
import type { CompletionBatcher } from './completion-batcher.js';
import { untilReachable } from './until-reachable.js';
import { AttemptLog } from './attempt-log.js';
import { AttemptSteps } from './attempt-steps.js';
import { AttemptStreams } from './attempt-streams.js';
import { AttemptUsage } from './attempt-usage.js';
import { errorClassify, InvalidOutputError } from './task-errors.js';
import type { AttemptSpend } from '../db/rows.js';
import { AttemptWorkspace, type WorkspaceSettings } from './attempt-workspace.js';

/** Why a running handler was told to stop. */
export type AbortReason = 'timeout' | 'lease_lost' | 'shutdown' | 'budget_exceeded' | 'workspace_too_large';

export class TaskAborted extends Error {
  constructor(readonly reason: AbortReason) {
    super(`task aborted: ${reason}`);
    this.name = 'TaskAborted';
  }
}

/** Thrown out of `ctx.spawn(…, { wait: true })` to unwind the handler: its attempt has ended. */
export class WaitingForSubtasks extends Error {
  constructor() {
    super('waiting for subtasks: this attempt has ended; the task runs again when they complete');
    this.name = 'WaitingForSubtasks';
  }
}

export interface TaskRunDeps {
  db: Db;
  agentId: string;
  def: AgentDefinition;
  batcher: CompletionBatcher;
  log: Logger;
  /** Where tasks' worktrees are made, and how long a kept one stays (docs/coding-agents.md). */
  workspaces: WorkspaceSettings;
}

type Outcome = { kind: 'output'; output: unknown } | { kind: 'error'; err: unknown } | { kind: 'aborted'; reason: AbortReason };

/**
 * One claimed task on its way through an agent: start, the handler under a
 * heartbeat timer and a max-duration timer, then exactly one of complete, fail,
 * release (shutdown) or nothing (lease lost, or waiting for subtasks).
 */

export class TaskRun {
  readonly done: Promise<void>;
  private readonly abort = new AbortController();
  private readonly ref: TaskRef;
  private readonly log: Logger;
  /** What the handler logs, also stored with this attempt (`dagent logs`). */
  private readonly attemptLog: AttemptLog;
  /** What the handler reported spending (reportCost): written and charged as it is reported (usage). */
  private readonly cost: Required<AttemptSpend> = { costUsd: 0, tokensIn: 0, tokensOut: 0, model: null };
  private readonly usage: AttemptUsage;
  /** What the handler streams (ctx.stream): written as it is produced, flushed before the attempt ends. */
  private readonly streams: AttemptStreams;
  /** The handler's durable steps (ctx.step). */
  private readonly steps: AttemptSteps;
  /** The task's git worktree, when it declares a workspace (ctx.workspace). */
  private readonly workspace: AttemptWorkspace;
  private waiting = false;
  private beatTimer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: TaskRunDeps, readonly task: ClaimedTask) {
    this.ref = { taskId: task.id, fence: task.fence };
    this.log = deps.log.child({ taskId: task.id, dagId: task.dagId, attempt: task.attempt });
    this.attemptLog = new AttemptLog(deps.db, this.ref, this.log);
    this.steps = new AttemptSteps(deps.db, this.ref, () => this.attemptLog.logger, this.log, () => this.stop('lease_lost'), (v) => jsonStorable(v, () => null));
    this.streams = new AttemptStreams(deps.db, this.ref, this.log);
    this.usage = new AttemptUsage(deps.db, this.ref, deps.agentId, this.log, () => this.stop('budget_exceeded'), () => this.stop('lease_lost'));
    this.workspace = new AttemptWorkspace(deps.db, task, deps.workspaces, () => this.attemptLog.logger);
    this.done = this.execute().catch((err) => this.log.error({ err }, 'task run failed unexpectedly; the reaper will recover the task'));
  }

  /** Stop the handler now and hand the task back (graceful shutdown past its grace period). */
  shutdown(): void {
    this.stop('shutdown');
  }

  private stop(reason: AbortReason): void {
    if (!this.abort.signal.aborted) this.abort.abort(new TaskAborted(reason));
  }

  private get leaseSec(): number {
    return this.task.heartbeatSec * LEASE_DEFAULTS.beatsPerLease;
  }

  private async execute(): Promise<void> {
    const { db } = this.deps;
    try {
      // The runtime claims straight into RUNNING (one statement fewer per task); a claim made otherwise is started here.
      if (!this.task.started) await untilReachable('start', () => taskStart(db, this.ref, this.leaseSec), this.log);
    } catch (err) {
      // A start that committed but whose reply was lost is retried into "already running, same fence": it is ours.
      const startedAlready = err instanceof DagentError && err.code === 'ILLEGAL_TRANSITION' && err.details.actual === 'running';
      if (!startedAlready && err instanceof DagentError) return this.log.warn({ err: err.message }, 'task was taken back before it started');
      if (!startedAlready) throw err;
    }
    // Shut down while the start was still being delivered: hand the task back without running it.
    if (this.abort.signal.aborted) return this.settle({ kind: 'aborted', reason: (this.abort.signal.reason as TaskAborted).reason });
    this.log.info({ key: this.task.key, type: this.task.type }, 'task started');
    this.beatTimer = setInterval(() => void this.beat().catch(() => {}), this.task.heartbeatSec * 1000);
    // A first beat soon after the start says "received": until the agent shows a sign of life, a lapsed
    // lease is taken for a lost claim reply and costs no attempt (reaper). Tasks done sooner need none.
    const ackTimer = setTimeout(() => void this.beat().catch(() => {}), Math.min(LEASE_DEFAULTS.receivedBeatSec, this.task.heartbeatSec) * 1000);
    const maxTimer = this.task.maxDurationSec ? setTimeout(() => this.stop('timeout'), this.task.maxDurationSec * 1000) : undefined;
    let outcome: Outcome;
    try {
      outcome = await Promise.race([
        Promise.resolve()
          // The worktree first, under the heartbeat and max-duration timers (a checkout of a large repository takes a while).
          .then(() => this.workspace.open())
          // In the attempt's trace context: spans the handler starts nest under the attempt's span.
          .then(() => context.with(traceparentContext(this.task.traceparent), () => this.deps.def.run(this.task, this.context())))
          .then((output): Outcome => ({ kind: 'output', output }), (err): Outcome => ({ kind: 'error', err })),
        new Promise<Outcome>((resolve) => {
          const aborted = () => resolve({ kind: 'aborted', reason: (this.abort.signal.reason as TaskAborted).reason });
          if (this.abort.signal.aborted) aborted();
          else this.abort.signal.addEventListener('abort', aborted);
        }),
      ]);
    } finally {
      clearInterval(this.beatTimer);
      clearTimeout(ackTimer);
      clearTimeout(maxTimer);
    }
    if (this.waiting) {
      this.attemptLog.close();
      this.log.info('waiting for subtasks');
    } else {
      if (this.abort.signal.aborted && outcome.kind !== 'aborted') outcome = { kind: 'aborted', reason: (this.abort.signal.reason as TaskAborted).reason };
      await this.settle(outcome);
    }
    // The attempt's row exists once it ended (by any end: even a lost lease's, the reaper's): what it says decides
    // whether its worktree goes, stays for the validation of its output, or is kept after a failure.
    await this.workspace.close();
  }

  private async settle(result: Outcome): Promise<void> {
    // The attempt's lines are stored before its outcome: once it ends, nothing joins it.
    const ended = result.kind === 'aborted' && (result.reason === 'lease_lost' || result.reason === 'budget_exceeded');
    if (!ended) await this.attemptLog.flush();
    this.attemptLog.close();
    // What its streams hold is durable before the attempt ends (a stream not ended by its writer ends with it).
    if (!ended) await this.streams.flush();
    let outcome = result;
    // The worktree's work is committed and summed up in the output (output.workspace); a worktree past its cap fails the attempt.
    if (outcome.kind === 'output') outcome = await this.workspace.finish(outcome.output).then((output): Outcome => ({ kind: 'output', output }), (err): Outcome => ({ kind: 'error', err }));
    const { db, batcher } = this.deps;
    // What the handler reported is charged by now (a report that reached a limit has ended the attempt): the end
    // reports nothing more but the model.
    const budget = await this.usage.flush();
    if (budget.stopped && outcome.kind !== 'aborted') outcome = { kind: 'aborted', reason: 'budget_exceeded' };
    const spent: Required<AttemptSpend> = { costUsd: 0, tokensIn: 0, tokensOut: 0, model: this.cost.model };
    try {
      const storable = outcome.kind === 'output' ? jsonStorable(outcome.output) : undefined;
      if (storable && 'error' in storable) outcome = { kind: 'error', err: new InvalidOutputError(`output cannot be stored as JSON: ${storable.error}`) };
      if (outcome.kind === 'output') {
        const output = (storable as { value: unknown }).value;
        const r = await untilReachable('complete', () => batcher.complete({ ...this.ref, output, ...spent }), this.log);
        if (!r.completed) return this.log.warn('completion refused: the lease was lost (the task was reaped and may run again elsewhere)');
        const s = r.settled;
        if (!s || s.status === 'completed') this.log.info({ costUsd: this.cost.costUsd }, 'task completed');
        else if (s.status === 'validating') this.log.info({ step: s.step, validationTaskId: s.validationTaskId }, 'output submitted; validating');
        else if (s.status === 'rejected') this.log.warn({ verdict: s.verdict, next: s.failure.status }, 'output rejected by validation');
        else this.log.warn({ error: s.error, next: s.failure.status }, 'verdict rejected: not a valid verdict');
        return;
      }
      if (outcome.kind === 'aborted' && outcome.reason === 'lease_lost') return this.log.warn('lease lost; abandoning the task');
      if (outcome.kind === 'aborted' && outcome.reason === 'budget_exceeded') return this.log.warn({ costUsd: this.cost.costUsd }, 'stopped at its spend limit (failed budget_exceeded)');
      if (outcome.kind === 'aborted' && outcome.reason === 'shutdown') {
        await untilReachable('release', () => taskRelease(db, { ...this.ref, ...spent, reason: `agent ${this.deps.agentId} shutting down` }), this.log);
        return this.log.info('released on shutdown');
      }
      const failure = outcome.kind === 'aborted' && outcome.reason === 'workspace_too_large' ? errorClassify(this.workspace.tooLarge)
        : outcome.kind === 'aborted' ? { errorClass: 'timeout', message: `ran past max_duration_sec (${this.task.maxDurationSec}s)` }
        : errorClassify(outcome.err);
      const details = 'details' in failure && failure.details ? jsonStorable(failure.details) : undefined;
      const record = { ...this.ref, ...failure, details: details && 'value' in details ? (details.value as Record<string, unknown>) : undefined, ...spent };
      // taskFail logs the failure, once, with its outcome.
      await untilReachable('fail', () => taskFail(db, record, { log: this.log }), this.log);
    } catch (err) {
      if (err instanceof LeaseLostError) return this.log.warn({ err: err.message }, 'lease lost before the outcome was recorded');
      throw err;
    }
  }

  private async beat(progress?: { progress?: number; message?: string }): Promise<void> {
    if (this.waiting) return;
    try {
      await taskHeartbeat(this.deps.db, { ...this.ref, ...progress, leaseSec: this.leaseSec });
      this.workspace.diskWatch(() => this.stop('workspace_too_large'));
    } catch (err) {
      if (err instanceof DagentError) this.stop('lease_lost');
      else this.log.warn({ err: errorMessage(err) }, 'heartbeat failed; will retry at the next beat');
      throw err;
    }
  }

  private context(): TaskContext {
    const signal = this.abort.signal;
    const live = () => {
      if (signal.aborted) throw signal.reason;
      if (this.waiting) throw new WaitingForSubtasks();
    };
    const attemptLog = this.attemptLog;
    const usage = this.usage;
    const workspace = this.workspace;
    return {
      agentId: this.deps.agentId,
      traceparent: this.task.traceparent,
      inputs: this.task.inputs,
      children: this.task.children,
      signal,
      get log() {
        return attemptLog.logger;
      },
      heartbeat: async (progress) => {
        live();
        try {
          await this.beat(progress);
        } catch (err) {
          // A database blip is not the handler's problem; a lost lease is (the signal is aborted too).
          if (!isConnectionLost(err)) throw err;
        }
      },
      spawn: async (specs, opts = {}) => {
        live();
        // A wait ends the attempt: its lines so far go first.
        if (opts.wait) await this.attemptLog.flush();
        // A wait ends the attempt: what it reported is charged first, and the spawn reports nothing more.
        if (opts.wait) await this.usage.flush();
        if (opts.wait) await this.streams.flush();
        const cost = { costUsd: 0, tokensIn: 0, tokensOut: 0, model: this.cost.model };
        const r = await taskSpawn(this.deps.db, this.ref, specs, { wait: opts.wait, cost, log: this.log });
        if (!r.waiting) return r.children;
        this.waiting = true;
        clearInterval(this.beatTimer);
        throw new WaitingForSubtasks();
      },
      reportCost: (c) => {
        const spent = { costUsd: c.usd ?? 0, tokensIn: c.tokens?.input ?? 0, tokensOut: c.tokens?.output ?? 0, model: c.model ?? null };
        // First: a figure that cannot be charged throws here, before anything counts it. Null (cost unknown) is kept as such.
        const durable = this.usage.report({
          ...spent, costUsd: c.usd === null ? null : spent.costUsd, cachedReadTokens: c.tokens?.cachedRead ?? 0, cacheWriteTokens: c.tokens?.cacheWrite ?? 0,
        });
        this.cost.costUsd += spent.costUsd;
        this.cost.tokensIn += spent.tokensIn;
        this.cost.tokensOut += spent.tokensOut;
        if (spent.model) this.cost.model = spent.model;
        this.steps.reportCost(spent);
        return durable;
      },
      get budget() {
        return usage.view;
      },
      onBudgetLow: (f) => usage.onLow(f),
      budgetFits: (estimate) => usage.fits(estimate),
      step: async (name, fn, options) => {
        live();
        return this.steps.run(name, fn, options);
      },
      stream: (name) => this.streams.open(name),
      get workspace() {
        return workspace.current;
      },
    };
  }
}

/**
 * What will be stored for a value in a jsonb column: NUL characters, which
 * PostgreSQL cannot store in jsonb, become U+FFFD; a value JSON cannot express
 * (a BigInt, a cycle) is an error. `problem`: what else refuses it (an output's size and depth by default; a
 * step's are checked where it is recorded). Checked per task, so one bad output fails
 * its own task instead of the batch it would have been written with.
 */
export function jsonStorable(value: unknown, problem: (normalized: unknown) => string | null = outputProblem): { value: unknown; json: string } | { error: string } {
  let normalized: unknown;
  let json: string;
  try {
    json = JSON.stringify(value ?? null, (_k, v: unknown) => (typeof v === 'string' && v.includes('\u0000') ? v.replaceAll('\u0000', '\uFFFD') : v)) ?? 'null';
    normalized = JSON.parse(json);
  } catch (e) {
    return { error: (e as Error).message };
  }
  // Past the JSON round trip: an unpaired surrogate, nesting past the limit, a size past the cap.
  const bad = problem(normalized);
  return bad ? { error: bad } : { value: normalized, json };
}
