import { pino, type Logger } from 'pino';
import { errorMessage } from '../db/pg-errors.js';
import type { Db } from '../db/handle.js';
import { agentRegister } from '../engine/ops/agents.js';
import { attemptLogAppend, type LogLineInput } from '../engine/read/attempt-logs.js';
import { modelUnusableError, taskClaim, type ClaimedTask } from '../engine/attempt/claim.js';
import { taskFail, type FailureOutcome } from '../engine/attempt/fail.js';
import { taskComplete } from '../engine/attempt/complete.js';
import { taskHeartbeat } from '../engine/attempt/lease.js';
import { taskRelease } from '../engine/attempt/release.js';
import { taskSpawn } from '../engine/dag/spawn.js';
import { stepRecord, stepReplay, type StepScope, type TaskStepRow } from '../engine/attempt/steps.js';
import { usageReport, type UsageAnswer, type UsageReportInput } from '../engine/attempt/usage.js';
import { limitText } from '../engine/attempt/usage-limits.js';
import { streamWrite, streamWriteCheck, type StreamWriteAnswer } from '../engine/attempt/streams.js';
import type { StreamChunkInput } from '../db/queries/streams.js';
import { untilReachable } from '../runtime/until-reachable.js';
import { nanoid } from 'nanoid';
import { grantApply, grantMaxHeld, tokenLive, type Principal } from '../auth/tokens.js';
import { claimWhenReady } from '../claim-wait/claim-when-ready.js';
import type { Claimant, ClaimWaiters, WaiterReach } from '../claim-wait/waiters.js';
import { DagentError, ForbiddenError, InvalidInputError, LeaseLostError } from '../errors.js';
import { CLAIM_WAIT_DEFAULTS, LEASE_DEFAULTS, MCP_DEFAULTS } from '../config/index.js';
import type { AttemptSpend } from '../db/rows.js';

interface Held {
  task: ClaimedTask;
  timer: NodeJS.Timeout;
  /** The step names this hold has used (recorded, or replayed): each names one step of an attempt, as ctx.step's do. */
  stepNames: Set<string>;
  /** The steps this hold recorded, as the model sent them: the same record sent again is answered, not refused. */
  stepsRecorded: Map<string, { json: string; result: unknown }>;
  /** The streams this hold writes, by name. */
  streams: Map<string, HeldStream>;
}

/** For a session made without a logger: untilReachable says what it retries. */
const silentLog = pino({ level: 'silent' });

/** A stream the session writes: it numbers the batches, one after the last the database answered. */
interface HeldStream {
  /** The sequence number the next batch starts at. */
  nextSeq: number;
  /** Batches not known to be written (a write whose answer never came, and those after it): sent first, in order. */
  unsent: Array<{ chunks: StreamChunkInput[]; end: boolean }>;
  /** The calls' writes, one after another, in the order the calls came. */
  queue: Promise<unknown>;
  ended: StreamWriteAnswer['ended'];
}


/**
 * One MCP session's agent: it claims as the token's agent, within the token's grant, and keeps the lease and
 * fencing token of what it holds to itself: a model names a task (or, holding one, nothing), never a fence. While
 * the session lives it heartbeats what it holds; when the session drops, the heartbeats stop and the reaper takes
 * the task back after its lease, as for any agent.
 */
export class McpAgentSession {
  private readonly held = new Map<string, Held>();
  /** Tasks taken back while held (lease lost, cancelled): the next call about one says so, once. */
  private readonly lost = new Map<string, string>();
  private registered: { signature: string; reach: WaiterReach } | undefined;
  readonly agentId: string;
  /** This session's waiting claims, as the node's waiters know them. */
  private readonly claimant: Claimant;
  /** Aborted when the session ends: a next_task waiting for work answers at once. */
  private readonly ended = new AbortController();
  /** The next_task calls under way: the session's end waits for them to answer (with nothing). */
  private readonly nextCalls = new Set<Promise<ClaimedTask | null>>();
  /** Why it ended, when what it held is released at its end (close's `release`). */
  private endReason: string | undefined;

  /** `waiters`: the node's waiting claims (claim-wait/): next_task waits for work there, as HTTP long polls do. */
  constructor(private readonly db: Db, private readonly principal: Principal, private readonly waiters: ClaimWaiters, private readonly log?: Logger) {
    if (principal.role !== 'agent' || !principal.agentId) throw new ForbiddenError('an agent token is needed to work tasks');
    this.agentId = principal.agentId;
    this.claimant = { agentId: principal.agentId };
  }

  /**
   * Claim one task (waiting up to waitSec for one), straight into RUNNING; null when none came. It waits as every
   * waiting claim of the node does (claim-wait/): a claim statement only when a READY hint names work it may take
   * (or, while work it covers is blocked, every few seconds), never after its token is revoked or its session ended.
   */
  async next(o: { waitSec?: number; dagId?: string; capabilities?: string[]; models?: string[] }): Promise<ClaimedTask | null> {
    const call = this.nextTask(o);
    this.nextCalls.add(call);
    try {
      return await call;
    } finally {
      this.nextCalls.delete(call);
    }
  }

  private async nextTask(o: { waitSec?: number; dagId?: string; capabilities?: string[]; models?: string[] }): Promise<ClaimedTask | null> {
    const reach = await this.register(o.capabilities ?? this.grantedCapabilities(), o.models ?? this.principal.grant?.models ?? []);
    const grant = this.principal.grant;
    const claim = async () => {
      const got = await taskClaim(this.db, this.agentId, {
        limit: 1, start: true, dagId: o.dagId, grant: grant ? { maxHeld: grantMaxHeld(grant), budgetUsd: grant.budgetUsd, tenants: this.principal.tenants } : undefined,
      });
      // A claim that was under way when the session ended: what it took is handed back, never held or returned.
      if (this.ended.signal.aborted) {
        await this.handBack(got, this.endReason ?? `MCP session of ${this.agentId} ended`);
        return [];
      }
      got.forEach((t) => this.hold(t));
      return got;
    };
    const waitSec = Math.min(Math.max(o.waitSec ?? 0, 0), CLAIM_WAIT_DEFAULTS.waitMaxSec);
    const since = waitSec > 0 ? await this.waiters.mark() : 0;
    const [first] = await claim();
    if (first || waitSec === 0) return first ?? null;
    const [task] = await claimWhenReady(this.waiters, this.db, this.log, {
      who: this.claimant, reach, since, waitSec, signal: this.ended.signal, claim,
      stillAllowed: () => tokenLive(this.db, this.principal.tokenId),
    });
    return task ?? null;
  }

  /** The task a call is about: the one named, or the only one held. */
  private pick(taskId?: string): Held {
    if (taskId !== undefined && this.lost.has(taskId)) {
      const why = this.lost.get(taskId)!;
      this.lost.delete(taskId);
      throw new DagentError('LEASE_LOST', `task ${taskId} is no longer yours (${why})`, { taskId });
    }
    if (taskId === undefined) {
      if (this.held.size === 1) return [...this.held.values()][0]!;
      if (this.held.size === 0) {
        const [gone] = [...this.lost.keys()];
        if (gone) return this.pick(gone);
        throw new InvalidInputError('you hold no task: call next_task first');
      }
      throw new InvalidInputError(`you hold ${this.held.size} tasks (${[...this.held.keys()].join(', ')}): name one with task_id`);
    }
    const h = this.held.get(taskId);
    if (!h) throw new ForbiddenError(`you do not hold task ${taskId}: only a task next_task gave this session can be reported on`, { taskId });
    return h;
  }

  async heartbeat(taskId: string | undefined, progress?: number, message?: string): Promise<Date> {
    const h = this.pick(taskId);
    return this.guarded(h, () => taskHeartbeat(this.db, { taskId: h.task.id, fence: h.task.fence, progress, message, leaseSec: this.leaseSec(h) }));
  }

  async complete(taskId: string | undefined, output: unknown, spent: AttemptSpend = {}) {
    const h = this.pick(taskId);
    this.modelCheck(h, spent.model);
    const r = await this.guarded(h, () => taskComplete(this.db, { taskId: h.task.id, fence: h.task.fence, output, ...spent }));
    this.drop(h.task.id);
    return r;
  }

  async fail(taskId: string | undefined, f: { errorClass: string; message: string; retryable?: boolean } & AttemptSpend): Promise<FailureOutcome> {
    const h = this.pick(taskId);
    this.modelCheck(h, f.model);
    const r = await this.guarded(h, () => taskFail(this.db, { taskId: h.task.id, fence: h.task.fence, ...f }, { log: this.log }));
    this.drop(h.task.id);
    return r;
  }

  async release(taskId: string | undefined, reason?: string, spent: AttemptSpend = {}): Promise<void> {
    const h = this.pick(taskId);
    this.modelCheck(h, spent.model);
    await this.guarded(h, () => taskRelease(this.db, { taskId: h.task.id, fence: h.task.fence, reason: reason ?? `MCP session of ${this.agentId} released it`, ...spent }));
    this.drop(h.task.id);
  }

  async spawn(taskId: string | undefined, subtasks: unknown, wait: boolean, spent: AttemptSpend = {}) {
    const h = this.pick(taskId);
    this.modelCheck(h, spent.model);
    const r = await this.guarded(h, () => taskSpawn(this.db, { taskId: h.task.id, fence: h.task.fence }, subtasks, {
      wait, cost: spent, log: this.log,
    }));
    // Waiting ends the attempt: the task comes back through next_task once its subtasks completed.
    if (r.waiting) this.drop(h.task.id);
    return r;
  }

  /**
   * The task's step by that name as an earlier attempt recorded it (engine/attempt/steps.ts), looked up under this
   * session's fence; undefined when none was. A step found is this attempt's use of the name, and what it had cost
   * is spend this attempt did not pay again.
   */
  async stepGet(taskId: string | undefined, name: string): Promise<TaskStepRow | undefined> {
    const h = this.pick(taskId);
    this.stepNameUnused(h, name);
    // The lookup that finds a step an earlier attempt recorded records the replay and what it had cost (once).
    const step = await this.guarded(h, () => stepReplay(this.db, { taskId: h.task.id, fence: h.task.fence }, name));
    if (step) h.stepNames.add(name);
    return step;
  }

  /** Record a step's result under this session's fence (first write wins: `recorded` false answers the earlier result). */
  async stepRecord(
    taskId: string | undefined, w: { name: string; result: unknown; scope?: StepScope; durationMs?: number } & AttemptSpend,
  ): Promise<{ recorded: boolean; result: unknown }> {
    const h = this.pick(taskId);
    this.modelCheck(h, w.model);
    // The same record sent again (a model whose call's reply was lost calls again): answered, not refused.
    const mine = h.stepsRecorded.get(w.name);
    if (mine !== undefined && mine.json === JSON.stringify(w.result ?? null)) return { recorded: true, result: mine.result };
    this.stepNameUnused(h, w.name);
    // Taken before the write, so that two calls of one name at once cannot both pass; given back if nothing was recorded.
    h.stepNames.add(w.name);
    try {
      const r = await this.guarded(h, () => stepRecord(this.db, { taskId: h.task.id, fence: h.task.fence, ...w }));
      if (r.recorded) h.stepsRecorded.set(w.name, { json: JSON.stringify(w.result ?? null), result: r.step.result });
      return { recorded: r.recorded, result: r.step.result };
    } catch (err) {
      h.stepNames.delete(w.name);
      throw err;
    }
  }

  /**
   * A name names one step of an attempt (as ctx.step's do, runtime/attempt-steps.ts): a loop that reused one would
   * be handed its first call's result for every later call.
   */
  private stepNameUnused(h: Held, name: string): void {
    if (!h.stepNames.has(name)) return;
    throw new InvalidInputError(
      `step ${JSON.stringify(name)}: the name is already used in this attempt; each step of an attempt needs a name of its own (in a loop: call-1, call-2, …)`,
      { field: 'name', step: name },
    );
  }

  /**
   * Report usage while the attempt runs (engine/attempt/usage.ts): charged at once and held to the attempt's limits.
   * Each call is its own report (a model that calls again reports again). A report that passes a limit has stopped
   * the attempt: the session no longer holds the task, and the next call about it says so.
   */
  async reportUsage(taskId: string | undefined, u: Omit<UsageReportInput, 'reportKey' | 'tokenId'>): Promise<UsageAnswer> {
    const h = this.pick(taskId);
    this.modelCheck(h, u.model);
    const r = await this.guarded(h, () => usageReport(this.db, { taskId: h.task.id, fence: h.task.fence }, {
      ...u, reportKey: nanoid(), tokenId: this.principal.tokenId,
    }, { log: this.log, agentId: this.principal.agentId }));
    if (r.stopped) this.taken(h, new DagentError('BUDGET_EXCEEDED', `stopped: ${limitText(r.stopped)}`));
    return r;
  }

  /**
   * Append one call's chunks to a stream of the attempt (engine/attempt/streams.ts), `end`: and end it. The session
   * numbers the batches, so a call is appended after every earlier call of the session, once: a write whose answer
   * did not come (the database unreachable) is sent again under the same from_seq, at once and then before the
   * next call's, and written once. A call the model makes again is a new call and appends again, unless it names
   * `seq` (the answer's chunks + 1 when it was first made): then a seq already written writes nothing.
   */
  async streamWrite(taskId: string | undefined, w: { name: string; chunks: StreamChunkInput[]; end: boolean; seq?: number }): Promise<StreamWriteAnswer> {
    const h = this.pick(taskId);
    streamWriteCheck({ name: w.name, fromSeq: 1, chunks: w.chunks });
    let s = h.streams.get(w.name);
    if (!s) h.streams.set(w.name, s = { nextSeq: 1, unsent: [], queue: Promise.resolve(), ended: null });
    const stream = s;
    const write = stream.queue.then(() => this.streamSend(h, w.name, stream, w));
    stream.queue = write.catch(() => undefined);
    return write;
  }

  private async streamSend(h: Held, name: string, s: HeldStream, w: { chunks: StreamChunkInput[]; end: boolean; seq?: number }): Promise<StreamWriteAnswer> {
    const next = s.nextSeq + s.unsent.reduce((n, b) => n + b.chunks.length, 0);
    if (w.seq !== undefined && w.seq < next) return { applied: false, chunks: next - 1, ended: s.ended };
    if (w.seq !== undefined && w.seq > next) {
      throw new InvalidInputError(`seq ${w.seq}: stream ${name} has ${next - 1} chunks; the next write starts at ${next}`, { field: 'seq', chunks: next - 1 });
    }
    s.unsent.push({ chunks: w.chunks, end: w.end });
    let answer: StreamWriteAnswer = { applied: false, chunks: s.nextSeq - 1, ended: s.ended };
    while (s.unsent.length) {
      const b = s.unsent[0]!;
      try {
        answer = await this.guarded(h, () => untilReachable('MCP stream write', () => streamWrite(this.db, { taskId: h.task.id, fence: h.task.fence }, {
          name, fromSeq: s.nextSeq, chunks: b.chunks, end: b.end,
        }), this.log ?? silentLog, MCP_DEFAULTS.streamWriteRetrySec * 1000));
      } catch (err) {
        // Refused (the lease lost, a bad batch): none of what waits can be written. Unanswered: kept for the next call.
        if (err instanceof DagentError) s.unsent = [];
        throw err;
      }
      s.unsent.shift();
      s.nextSeq = answer.chunks + 1;
      s.ended = answer.ended;
    }
    return answer;
  }

  async logLines(taskId: string | undefined, lines: LogLineInput[]) {
    const h = this.pick(taskId);
    return this.guarded(h, () => attemptLogAppend(this.db, { taskId: h.task.id, fence: h.task.fence }, lines));
  }

  /**
   * The session is over: a waiting next_task answers at once (resolves once it has), heartbeats stop. What it holds goes back through the
   * reaper when its lease lapses, or, given `release` (the reason: its token was revoked), is released now, no
   * attempt spent, as a deregistering agent's tasks are.
   */
  async close(o: { release?: string } = {}): Promise<void> {
    this.endReason = o.release;
    this.ended.abort();
    const held = [...this.held.values()];
    for (const h of held) clearInterval(h.timer);
    this.held.clear();
    if (o.release !== undefined) await this.handBack(held.map((h) => h.task), o.release);
    await Promise.allSettled([...this.nextCalls]);
  }

  private async handBack(tasks: ClaimedTask[], reason: string): Promise<void> {
    await Promise.all(tasks.map((t) => taskRelease(this.db, { taskId: t.id, fence: t.fence, reason }).catch((err) => {
      // Taken back meanwhile (the reaper, a cancel): nothing of this session's is left to release.
      this.log?.info({ taskId: t.id, err: errorMessage(err) }, 'MCP session could not release a task at its end');
    })));
  }

  /** A model the session says its attempt used must be one it could use (engine/ops/agents.ts reportedModelCheck). */
  private modelCheck(h: Held, model: string | null | undefined): void {
    if (!model) return;
    const taskModels = [...new Set([...h.task.spec.models, ...h.task.spec.fallbackModels])];
    const refused = modelUnusableError('model', model, taskModels, this.registered?.reach.models ?? []);
    if (refused) throw refused;
  }

  private grantedCapabilities(): string[] {
    return this.principal.grant?.capabilities ?? [];
  }

  /** Register (again only when what is asked for changed), within the token's grant; what it may claim. */
  private async register(capabilities: string[], models: string[]): Promise<WaiterReach> {
    const signature = JSON.stringify([capabilities, models]);
    if (this.registered?.signature === signature) return this.registered.reach;
    const reg = grantApply(this.principal, {
      id: this.agentId, type: 'mcp', capabilities, models, maxConcurrent: undefined as number | undefined,
      budgetUsd: undefined as number | null | undefined, metadata: { via: 'mcp' }, tenants: null as string[] | null,
    });
    await agentRegister(this.db, reg);
    this.registered = { signature, reach: { capabilities: reg.capabilities, models: reg.models ?? [] } };
    return this.registered.reach;
  }

  private leaseSec(h: Held): number {
    return h.task.heartbeatSec * LEASE_DEFAULTS.beatsPerLease;
  }

  private hold(task: ClaimedTask): void {
    const h: Held = { task, timer: setInterval(() => void this.beat(h), task.heartbeatSec * 1000), stepNames: new Set(), stepsRecorded: new Map(), streams: new Map() };
    h.timer.unref();
    // A first beat soon says "received" (as the runtime's does): a lease that lapses before it was a lost reply, not a crash.
    setTimeout(() => { if (this.held.get(task.id) === h) void this.beat(h); }, Math.min(LEASE_DEFAULTS.receivedBeatSec, task.heartbeatSec) * 1000).unref();
    this.held.set(task.id, h);
  }

  private async beat(h: Held): Promise<void> {
    try {
      await taskHeartbeat(this.db, { taskId: h.task.id, fence: h.task.fence, leaseSec: this.leaseSec(h) });
    } catch (err) {
      if (err instanceof DagentError) this.taken(h, err);
      else this.log?.warn({ taskId: h.task.id, err: errorMessage(err) }, 'MCP session heartbeat failed; next beat retries');
    }
  }

  /** A refused report: a lost lease means the task is no longer this session's. */
  private async guarded<T>(h: Held, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof LeaseLostError || (err instanceof DagentError && err.code === 'ILLEGAL_TRANSITION')) this.drop(h.task.id);
      throw err;
    }
  }

  private taken(h: Held, err: DagentError): void {
    this.drop(h.task.id);
    this.lost.set(h.task.id, err.message);
    this.log?.info({ taskId: h.task.id, agentId: this.agentId }, 'MCP session lost a task it held');
  }

  private drop(taskId: string): void {
    const h = this.held.get(taskId);
    if (h) clearInterval(h.timer);
    this.held.delete(taskId);
  }
}
