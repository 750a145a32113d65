import { readFileSync, readlinkSync } from 'node:fs';
import os from 'node:os';
import { nanoid } from 'nanoid';
import type { Logger } from 'pino';
import { errorMessage, isConnectionLost } from '../db/pg-errors.js';
import type { Db } from '../db/handle.js';
import { agentBeat, agentDeregister, agentDrain, agentHolder, agentRegister, type AgentRegistration } from '../engine/ops/agents.js';
import { CONFIG_DEFAULTS, LEASE_DEFAULTS, WORKSPACE_DEFAULTS, agentInstanceDefault } from '../config/index.js';
import { durationSeconds } from '../durations.js';
import type { WorkspaceSettings } from './attempt-workspace.js';
import { taskClaim, type ClaimedTask } from '../engine/attempt/claim.js';
import { taskRelease } from '../engine/attempt/release.js';
import { taskHeldByAgent } from '../db/queries/tasks-read.js';
import { logger } from '../observability/logger.js';
import { ConflictError, InvalidInputError } from '../errors.js';
import { CompletionBatcher } from './completion-batcher.js';
import type { AgentDefinition } from './define-agent.js';
import { UNREACHABLE_RETRY_MAX_MS, UNREACHABLE_RETRY_MIN_MS } from './until-reachable.js';
import { ReadyListener } from '../db/ready-listener.js';
import { groupProbe, handOnIfReady } from '../claim-wait/claim-when-ready.js';
import { ClaimWaiters, type Claimant, type Wake, type WaiterReach } from '../claim-wait/waiters.js';
import { CLAIM_WAIT_DEFAULTS } from '../config/index.js';
import { TaskRun } from './task-run.js';

/** Fallback poll when no notification arrives; each wait is jittered ±20 % so agents do not poll in step. */
export const POLL_INTERVAL_MS_DEFAULT = 2_000;
/** How often the agent row is heartbeated: well inside the silence after which the reaper marks an agent offline (AGENT_STALE_SEC_DEFAULT). */
export const AGENT_BEAT_MS = 10_000;
/** How long running tasks may take to finish on shutdown before they are released. */
export const SHUTDOWN_GRACE_MS_DEFAULT = 30_000;
/** After the grace period, how long releases and pending results may take before the agent gives up on them. */
export const SHUTDOWN_SETTLE_MS = 15_000;

export interface AgentRunnerOptions {
  /** The database, and its URLs: the LISTEN connection goes to `sessionUrl` (past a pooler) when given, else `url`. */
  database: { db: Db; url: string; sessionUrl?: string };
  /**
   * A fixed id. Reusing an id re-registers the same agent (its spend is kept), even while another process holds it
   * (a rolling deploy). Default: `<name>-<instance>`, the same across restarts, or `<name>-<instance>-<n>` (the
   * lowest n from 2) while another live process holds that (stableIdRegister).
   */
  id?: string;
  /** The instance label of the default id (DAGENT_AGENT_INSTANCE). Default: the host name. */
  instance?: string;
  /** Tasks run at once. Default the definition's maxConcurrent, else 1. */
  concurrency?: number;
  /** Default POLL_INTERVAL_MS_DEFAULT. */
  pollIntervalMs?: number;
  /** Seconds a claimed task may wait for its start. Default LEASE_DEFAULTS.claimTtlSec. */
  claimTtlSec?: number;
  /** Share one listener among the agents of a process. Default: the runner opens its own. */
  listener?: ReadyListener;
  /** The process's waiting claims (claim-wait/), on that listener: where an idle claim loop waits for work. Default: its own. */
  waiters?: ClaimWaiters;
  /**
   * Take the dependents its completions unblock in the completion's own statement, where it would claim them
   * first (docs/priority.md "Handing dependents on"). Default true; false: they go READY and are claimed like any
   * task (the benchmark's --no-hand-off).
   */
  handOff?: boolean;
  /**
   * Where tasks' git worktrees are made (DAGENT_WORKSPACE_ROOT), how long one kept after a failure stays
   * (DAGENT_RETENTION_WORKSPACES), and the repository URLs this agent may clone (DAGENT_WORKSPACE_REPO_URLS).
   * Default CONFIG_DEFAULTS.workspaceRoot, WORKSPACE_DEFAULTS.keptPeriod and none.
   */
  workspaces?: Partial<WorkspaceSettings>;
  log?: Logger;
}

/** Most slots a default id is tried at (`<name>-<instance>-<n>`) before start gives up. */
export const AGENT_ID_SLOTS_MAX = 64;

/** Tells this process apart from an earlier one that had the same pid (a restarted container's pid 1). */
const PROCESS_NONCE = nanoid(10);

/**
 * Which process table this process's pid belongs to: the machine's boot and the pid namespace (Linux). Two
 * containers can share a host name and each be pid 1; only a holder in this very table can be looked up by pid.
 * Null where it cannot be known: then no holder is taken for gone by its pid.
 */
const PID_SPACE = (() => {
  try {
    return `${readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()}/${readlinkSync('/proc/self/ns/pid')}`;
  } catch {
    return null;
  }
})();

/** Seconds before a failed claim that its lost tasks may have been claimed (clocks and in-flight time). */
const LOST_CLAIM_MARGIN_SEC = 5;

/**
 * Runs one agent: registers it, claims up to its free slots (capabilities and
 * budget are matched by the claim), runs each task as a TaskRun, wakes on NOTIFY
 * and polls as the fallback, heartbeats the agent row, and on stop drains:
 * no new claims, running tasks get a grace period, the rest are released
 * without losing an attempt. Database outages are ridden out with backoff.
 */
export class AgentRunner {
  private agentId: string;
  private readonly runs = new Map<string, TaskRun>();
  /** Where the idle claim loop waits for READY work it may take: the node's one wait-for-work mechanism. */
  private readonly waiters: ClaimWaiters;
  private readonly ownsWaiters: boolean;
  /** The claim loop as the waiters know it (one object: a hint it tried is not handed to it again). */
  private readonly claimant: Claimant;
  private readonly reach: WaiterReach;
  /** Ends the loop's current wait at once: a slot freed, or shutdown. A wake while it is not waiting is kept. */
  private localWake = new AbortController();
  private waiting = false;
  private localWakePending = false;
  private readonly batcher: CompletionBatcher;
  private log: Logger;
  private readonly concurrency: number;
  private readonly listener: ReadyListener;
  private readonly ownsListener: boolean;
  private loop: Promise<void> | undefined;
  private beatTimer: NodeJS.Timeout | undefined;
  private stopping = false;
  private stopped: Promise<void> | undefined;
  private claimFailures = 0;
  /** While it looks for such tasks (releaseLostClaims): completions hand this agent nothing. */
  private releasing = false;
  /** When a claim failed on a lost connection: it may have committed, its tasks held under this id with no run here. */
  private claimInDoubtSince: number | undefined;
  /** Tells this process's registration apart from another process that reuses the id. */
  private readonly instance = nanoid(10);

  constructor(readonly def: AgentDefinition, private readonly o: AgentRunnerOptions) {
    this.agentId = o.id ?? `${def.name}-${o.instance ?? agentInstanceDefault()}`;
    this.concurrency = o.concurrency ?? def.maxConcurrent ?? 1;
    this.log = (o.log ?? logger()).child({ agentId: this.id });
    this.batcher = new CompletionBatcher({
      db: o.database.db,
      // The dependents a completion unblocks go straight to this agent when it would claim them first: one per
      // completed task at most (the slot it frees; the claim loop fills slots that were idle, and a claim takes a
      // wide fan-out more cheaply), within the slots its runs leave free (the server counts again, exactly).
      handTo: (completing) => {
        const max = Math.min(completing, this.concurrency - this.runs.size + completing);
        return o.handOff === false || this.stopping || this.releasing || max <= 0 ? null : {
          agentId: this.id, capabilities: this.def.capabilities, max, start: true, claimTtlSec: o.claimTtlSec ?? LEASE_DEFAULTS.claimTtlSec,
        };
      },
      onHanded: (tasks) => tasks.forEach((t) => this.launch(t)),
      onHandOffInDoubt: () => { this.claimInDoubtSince ??= Date.now(); },
    });
    this.ownsListener = !o.listener;
    this.listener = o.listener ?? new ReadyListener({ url: o.database.sessionUrl ?? o.database.url, log: this.log });
    this.ownsWaiters = !o.waiters;
    this.waiters = o.waiters ?? new ClaimWaiters({
      databaseUrl: o.database.sessionUrl ?? o.database.url, log: this.log, listener: this.listener,
      perAgent: CLAIM_WAIT_DEFAULTS.waitingPerAgent, max: CLAIM_WAIT_DEFAULTS.waitingMax, readyInGroup: groupProbe(o.database.db),
    });
    this.claimant = { agentId: this.agentId };
    this.reach = { capabilities: def.capabilities, models: def.models ?? [], tenants: def.tenants ?? null };
  }

  /** The agent's id: known for certain once start() registered it (a default id may move to a free slot). */
  get id(): string {
    return this.agentId;
  }

  /** Tasks running now. */
  get running(): number {
    return this.runs.size;
  }

  async start(): Promise<void> {
    const { db } = this.o.database;
    const problem = await this.def.preflight?.();
    if (problem) throw new InvalidInputError(`agent ${this.def.name} cannot start: ${problem}`, { agent: this.def.name, preflight: true });
    const registration = (id: string) => ({
      id, type: this.def.name, capabilities: this.def.capabilities, models: this.def.models, tenants: this.def.tenants ?? null, maxConcurrent: this.concurrency,
      budgetUsd: this.def.budgetUsd ?? null, dailyBudgetUsd: this.def.dailyBudgetUsd ?? null, metadata: { host: os.hostname(), pid: process.pid, pidSpace: PID_SPACE, process: PROCESS_NONCE, instance: this.instance },
    });
    if (this.o.id) await agentRegister(db, registration(this.o.id));
    else await this.stableIdRegister(registration);
    if (this.stopping) return;
    this.claimant.agentId = this.id;
    if (this.ownsListener) await this.listener.start();
    if (this.stopping) return;
    this.beatTimer = setInterval(() => {
      agentBeat(db, this.id).catch((err) => this.log.warn({ err: errorMessage(err) }, 'agent heartbeat failed'));
    }, AGENT_BEAT_MS);
    this.loop = this.claimLoop();
    this.log.info({ capabilities: this.def.capabilities, concurrency: this.concurrency }, 'agent started');
  }

  /**
   * Register under the default id, `<name>-<instance>`, which a restart of this agent finds again: its spend,
   * budget and history go on. An id another live process holds (active, heard from within
   * LEASE_DEFAULTS.agentStaleSec) is passed over for the next slot, `<name>-<instance>-2` and on, so two processes
   * on one host never share an id; a holder that was a process of this host that no longer runs (killed, or an
   * earlier process with this pid) is taken over at once. The check and the registration are one statement.
   */
  private async stableIdRegister(registration: (id: string) => AgentRegistration): Promise<void> {
    const { db } = this.o.database;
    const base = this.agentId;
    for (let n = 1; n <= AGENT_ID_SLOTS_MAX; n++) {
      const id = n === 1 ? base : `${base}-${n}`;
      const holder = await agentHolder(db, id);
      const replaceable = holder && holderGone(holder.metadata) ? String(holder.metadata.instance) : null;
      const row = await agentRegister(db, registration(id), { staleSec: LEASE_DEFAULTS.agentStaleSec, instance: this.instance, replaceable });
      if (row) {
        this.agentId = id;
        this.log = (this.o.log ?? logger()).child({ agentId: id });
        return;
      }
    }
    throw new ConflictError(`agents ${base} to ${base}-${AGENT_ID_SLOTS_MAX} are all held by live processes: give this one another instance label (DAGENT_AGENT_INSTANCE) or an id`, { agentId: base });
  }

  /**
   * Graceful shutdown: status draining (claims stop), running tasks get
   * `graceMs` to finish, then are released back to READY without losing an
   * attempt; the agent deregisters. Safe to call twice.
   */
  stop(opts: { graceMs?: number } = {}): Promise<void> {
    this.stopped ??= this.shutdown(opts.graceMs ?? SHUTDOWN_GRACE_MS_DEFAULT);
    return this.stopped;
  }

  private async shutdown(graceMs: number): Promise<void> {
    const { db } = this.o.database;
    this.stopping = true;
    this.wake();
    await agentDrain(db, this.id, this.instance).catch((err) => this.log.warn({ err: errorMessage(err) }, 'could not mark the agent draining'));
    await this.loop;
    this.log.info({ running: this.runs.size, graceMs }, 'draining');
    const all = () => Promise.all([...this.runs.values()].map((r) => r.done));
    if (!(await within(all(), graceMs))) {
      for (const r of this.runs.values()) r.shutdown();
      // Releases and results still waiting for an unreachable database get a bounded time; the reaper covers the rest.
      if (!(await within(all(), SHUTDOWN_SETTLE_MS))) this.log.error({ unsettled: this.runs.size }, 'gave up waiting for tasks to settle; the reaper will take them back');
    }
    await within(this.batcher.drain(), SHUTDOWN_SETTLE_MS);
    clearInterval(this.beatTimer);
    if (this.ownsWaiters) await this.waiters.close();
    if (this.ownsListener) await this.listener.stop();
    await agentDeregister(db, this.id, this.instance).catch((err) => this.log.warn({ err: errorMessage(err) }, 'could not deregister'));
    this.log.info('agent stopped');
  }

  /**
   * Claim into the free slots; when that finds nothing (or no slot is free), wait: for a READY hint naming work
   * this agent may take (the node's waiters, claim-wait/), a slot freeing up, or the poll interval, the fallback
   * that keeps polling the truth. A hint it was woken by goes on to the next waiting claim when this claim left
   * some of that work READY.
   */
  private async claimLoop(): Promise<void> {
    const pollMs = this.o.pollIntervalMs ?? POLL_INTERVAL_MS_DEFAULT;
    let woken: Wake | undefined;
    let since = 0;
    while (!this.stopping) {
      const free = this.concurrency - this.runs.size;
      let claimed = 0;
      if (free > 0) {
        try {
          since = await this.waiters.mark();
          const tasks = await taskClaim(this.o.database.db, this.id, {
            limit: free, capabilities: this.def.capabilities, claimTtlSec: this.o.claimTtlSec, start: true,
          });
          claimed = tasks.length;
          this.claimFailures = 0;
          for (const t of tasks) this.launch(t);
          if (this.claimInDoubtSince !== undefined) await this.releaseLostClaims();
          // A full claim may have left more READY work behind: look again once a slot frees up.
        } catch (err) {
          if (woken) handOnIfReady(this.waiters, this.o.database.db, this.log, this.claimant, woken);
          woken = undefined;
          if (isConnectionLost(err)) this.claimInDoubtSince ??= Date.now();
          const delay = Math.min(UNREACHABLE_RETRY_MAX_MS, UNREACHABLE_RETRY_MIN_MS * 2 ** this.claimFailures++);
          this.log.warn({ err: errorMessage(err), retryInMs: delay, databaseUnreachable: isConnectionLost(err) }, 'claim failed');
          await new Promise((r) => setTimeout(r, delay));
          continue;
        }
      }
      // Woken by a hint, but its free slots were not all filled (or it had none by then): what it could not take may
      // be another waiter's. A runner that filled them leaves the rest of the hint to the others it woke (dispatch
      // woke as many as the hint counted); probing after every wake cost makespan's layered DAGs ~0.5 ms a hop.
      if (woken && (free <= 0 || claimed < free)) handOnIfReady(this.waiters, this.o.database.db, this.log, this.claimant, woken);
      woken = undefined;
      if (this.stopping) break;
      woken = await this.idle(this.concurrency - this.runs.size > 0, since, pollMs * (0.8 + Math.random() * 0.4));
    }
  }

  /**
   * Wait up to `ms`: with a free slot, for a hint of work this agent may take (heard since `since`, the mark taken
   * before the claim that found nothing, included); with none, only for a slot to free up (a full runner never
   * takes a hint's turn from an agent that could use it). A local wake ends either at once.
   */
  private async idle(free: boolean, since: number, ms: number): Promise<Wake | undefined> {
    if (this.localWakePending) {
      this.localWakePending = false;
      return undefined;
    }
    this.localWake = new AbortController();
    const signal = this.localWake.signal;
    this.waiting = true;
    try {
      if (free) {
        const end = await this.waiters.wait(this.claimant, this.reach, since, ms, signal);
        return end.woken ? end.wake : undefined;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        signal.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
      });
      return undefined;
    } finally {
      this.waiting = false;
    }
  }

  /** End the claim loop's wait now (a slot freed, shutdown); kept for the next wait when it is not waiting. */
  private wake(): void {
    if (this.waiting) this.localWake.abort();
    else this.localWakePending = true;
  }

  /**
   * A claim that failed on a lost connection may have committed without its reply reaching us:
   * its tasks are held under this agent's id with no run here. Once the database answers again,
   * hand them back (a release spends no attempt) instead of leaving them to lapse. Only tasks
   * claimed since the failure (with a margin), so another process reusing this id keeps its own.
   */
  private async releaseLostClaims(): Promise<void> {
    // A completion may hand this agent tasks it has not launched yet: none is asked to while this looks, and it
    // looks only once none that was asked is in flight.
    this.releasing = true;
    try {
      if (this.batcher.writing === 0) await this.heldWithoutRunRelease();
    } finally {
      this.releasing = false;
    }
  }

  private async heldWithoutRunRelease(): Promise<void> {
    const sinceSec = Math.ceil((Date.now() - this.claimInDoubtSince!) / 1000) + LOST_CLAIM_MARGIN_SEC;
    try {
      const held = await taskHeldByAgent(this.o.database.db, this.id, sinceSec);
      for (const t of held.filter((h) => !this.runs.has(`${h.id}:${h.fence}`))) {
        await taskRelease(this.o.database.db, { taskId: t.id, fence: t.fence, reason: `the claim's reply was lost; released by ${this.id}` })
          .then(() => this.log.warn({ taskId: t.id, key: t.key }, 'released a task whose claim reply was lost'))
          .catch((err) => this.log.warn({ err: errorMessage(err), taskId: t.id }, 'could not release a task whose claim reply was lost; it will lapse'));
      }
      this.claimInDoubtSince = undefined;
    } catch (err) {
      this.log.warn({ err: errorMessage(err) }, 'could not look for claims whose reply was lost; will look again');
    }
  }

  private launch(task: ClaimedTask): void {
    const workspaces = {
      root: this.o.workspaces?.root ?? CONFIG_DEFAULTS.workspaceRoot,
      keptSec: this.o.workspaces?.keptSec === undefined ? durationSeconds(WORKSPACE_DEFAULTS.keptPeriod) : this.o.workspaces.keptSec,
      repoUrls: this.o.workspaces?.repoUrls ?? [],
    };
    const run = new TaskRun({ db: this.o.database.db, agentId: this.id, def: this.def, batcher: this.batcher, log: this.log, workspaces }, task);
    // Keyed by claim, not task: the reaper may hand a task back to this agent while its old run still winds down.
    const key = `${task.id}:${task.fence}`;
    this.runs.set(key, run);
    void run.done.finally(() => {
      this.runs.delete(key);
      this.wake();
    });
  }
}

/**
 * Whether the process that registered `metadata` is gone: it ran in this process table (same host, boot and pid
 * namespace), and its pid is no process, or is this one (it was an earlier process with our pid).
 */
function holderGone(metadata: Record<string, unknown>): boolean {
  const pid = metadata.pid;
  if (PID_SPACE === null || metadata.pidSpace !== PID_SPACE || metadata.host !== os.hostname()) return false;
  if (typeof pid !== 'number' || !Number.isInteger(pid) || pid <= 0 || typeof metadata.instance !== 'string') return false;
  if (metadata.process === PROCESS_NONCE) return false;
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** True if `p` settled within `ms`. */
async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const settled = await Promise.race([p.then(() => true, () => true), new Promise<boolean>((r) => { timer = setTimeout(() => r(false), ms); })]);
  clearTimeout(timer);
  return settled;
}
