import type { Logger } from 'pino';
import { READY_CHANNEL } from '../db/statement.js';
import { readyHintParse, type ReadyHint } from '../db/ready-hint-payload.js';
import { ReadyListener } from '../db/ready-listener.js';
import { CLAIM_WAIT_DEFAULTS } from '../config/index.js';

/** How many of the latest hints are kept for claims that were running when they came. */
const RECENT_MAX = 256;
/** How many reaches the node remembers finding nothing READY for (nothingReadyFor); past it, it forgets them all. */
const NOTHING_READY_MAX = 4096;

/**
 * What a waiting claim can take: the agent's capabilities (within its token's grant), models, and the tenants it serves
 * (absent or null: all). READY hints name a claim group and its tenant: an agent that serves some tenants only wakes
 * for their work.
 */
export interface WaiterReach { capabilities: readonly string[]; models: readonly string[]; tenants?: readonly string[] | null }

/** A hint on its way through the waiters: who has tried it already (each waiting claim tries a hint once). */
export interface Wake { hint: ReadyHint | null; tried: WeakSet<Claimant> }

/** Why a wait ended: a hint woke it, or time ran out, or the caller gave up. */
export type WaitEnd = { woken: true; wake: Wake } | { woken: false };

/** One waiting claimant (a runner's claim loop, an HTTP request or an MCP call, across its waits), and the agent it claims for. */
export interface Claimant { agentId: string }

interface Waiter {
  who: Claimant;
  reach: WaiterReach;
  wake: (w: Wake) => void;
  stop: () => void;
}

/**
 * Waiting for work, one way for the whole node: the agent runtime's idle claim loops, HTTP long polls
 * (`POST /api/agents/:id/claim` with `wait_sec`) and MCP's `next_task` that found nothing wait here, on the
 * node's one LISTEN connection, for a READY hint naming work their agent may take. A hint names a claim group
 * and how many of its tasks became READY; it wakes that many of the waiters whose agent covers the group,
 * oldest first, so one READY task costs one claim statement, not one per waiting agent. Once a woken waiter's
 * claim is done, its turn may go on to the next (`passOn`, through handOnIfReady). A hint without a group, and
 * every reconnect of the LISTEN connection (hints sent meanwhile are lost), wakes everyone.
 */
export class ClaimWaiters {
  private readonly waiting = new Set<Waiter>();
  private readonly perAgent = new Map<string, number>();
  private inFlight = 0;
  /** Hints heard so far, and the latest RECENT_MAX of them: a claim checks those that came while it ran. */
  private heard = 0;
  private readonly recent: Array<{ seq: number; wake: Wake }> = [];
  /** Per reach (reachKey): the mark taken before a READY probe that found nothing it may take, and when. */
  private readonly nothingReady = new Map<string, { since: number; at: number }>();
  private listener: ReadyListener | undefined;
  private own = false;
  private starting: Promise<void> | undefined;
  private unsubscribe: (() => void) | undefined;
  private closed = false;

  /**
   * `listener`: the process's LISTEN connection; without one, a connection of its own is opened at the first wait.
   * `perAgent`, `max`: how many claims may wait at once, for one agent and in all.
   */
  constructor(private readonly o: { databaseUrl: string; log?: Logger; listener?: ReadyListener; perAgent: number; max: number }) {}

  /** Long polls (HTTP, MCP) under way on this node: waiting, or claiming between two waits. */
  get size(): number {
    return this.inFlight;
  }

  /**
   * A long poll of `agentId` begins, within its own and the node's ceilings (false: it may not
   * wait now). Counted until `leave`, its claims between waits included, so re-waiting after a
   * wake can never take it past them.
   */
  enter(agentId: string): boolean {
    const mine = this.perAgent.get(agentId) ?? 0;
    if (this.closed || this.inFlight >= this.o.max || mine >= this.o.perAgent) return false;
    this.perAgent.set(agentId, mine + 1);
    this.inFlight++;
    return true;
  }

  leave(agentId: string): void {
    const mine = (this.perAgent.get(agentId) ?? 0) - 1;
    if (mine > 0) this.perAgent.set(agentId, mine);
    else this.perAgent.delete(agentId);
    this.inFlight--;
  }

  /**
   * Listening (the first call opens the connection when the server has none of its own); resolves
   * to a mark to take just before a claim statement and to give `wait` after it came back empty.
   */
  async mark(): Promise<number> {
    await this.listen();
    return this.heard;
  }

  /**
   * Resolves when a hint wakes this waiter, or after `ms`, or on `signal`. A hint heard since `since`
   * (a `mark()` taken before the claim that found nothing) that the agent may take ends it at once:
   * the claim's snapshot may have missed that work.
   */
  async wait(who: Claimant, reach: WaiterReach, since: number, ms: number, signal?: AbortSignal): Promise<WaitEnd> {
    await this.listen();
    if (signal?.aborted || this.closed) return { woken: false };
    const missed = this.heardSince(since, who, reach);
    if (missed) return { woken: true, wake: missed };
    return new Promise((resolve) => {
      const done = (end: WaitEnd) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', abort);
        this.waiting.delete(w);
        resolve(end);
      };
      const abort = () => done({ woken: false });
      const w: Waiter = { who, reach, wake: (wake) => done({ woken: true, wake }), stop: abort };
      const timer = setTimeout(abort, ms);
      signal?.addEventListener('abort', abort, { once: true });
      this.waiting.add(w);
    });
  }

  /** `who` was woken by `wake` and is done with it: the turn goes to the next waiter covering the group that has not tried it. */
  passOn(who: Claimant, wake: Wake): void {
    wake.tried.add(who);
    if (wake.hint?.group) this.dispatch({ hint: { ...wake.hint, count: 1 }, tried: wake.tried });
  }

  /** A READY probe found nothing `reach` may take; `since` is a mark taken before it. */
  noteNothingReady(reach: WaiterReach, since: number): void {
    if (this.nothingReady.size >= NOTHING_READY_MAX) this.nothingReady.clear();
    this.nothingReady.set(reachKey(reach), { since, at: Date.now() });
  }

  /**
   * True when this node knows that nothing is READY for `reach`: a probe found nothing (noteNothingReady), and no
   * hint it may take has come since, nor more hints than are kept, nor a reconnect (a hint without a group), and
   * for at most CLAIM_WAIT_DEFAULTS.nothingReadyTrustSec. Every task that becomes READY sends a hint, so a long
   * poll can then wait without running a claim first: an idle fleet's renewed polls cost no claim statement each
   * (docs/benchmarks.md, "A fleet on several nodes").
   */
  nothingReadyFor(reach: WaiterReach): boolean {
    const key = reachKey(reach);
    const noted = this.nothingReady.get(key);
    if (noted === undefined || this.closed) return false;
    const quiet = Date.now() - noted.at < CLAIM_WAIT_DEFAULTS.nothingReadyTrustSec * 1000
      && this.heardSince(noted.since, undefined, reach) === undefined;
    if (!quiet) this.nothingReady.delete(key);
    return quiet;
  }

  /** True once the node is shutting down: a long poll answers with what it has, and waits no more. */
  get closing(): boolean {
    return this.closed;
  }

  /** Ends every wait (they answer with nothing) and stops listening. */
  async close(): Promise<void> {
    this.closed = true;
    for (const w of [...this.waiting]) w.stop();
    this.unsubscribe?.();
    if (this.own) await this.listener?.stop();
    this.listener = undefined;
  }

  private listen(): Promise<void> {
    this.starting ??= (async () => {
      this.own = !this.o.listener;
      this.listener = this.o.listener ?? new ReadyListener({ url: this.o.databaseUrl, log: this.o.log, channels: [READY_CHANNEL] });
      this.unsubscribe = this.listener.subscribe((payload) => {
        const wake: Wake = { hint: payload === undefined ? null : readyHintParse(payload), tried: new WeakSet() };
        this.recent.push({ seq: ++this.heard, wake });
        if (this.recent.length > RECENT_MAX) this.recent.shift();
        this.dispatch(wake);
      }, READY_CHANNEL);
      if (this.own) await this.listener.start();
    })();
    return this.starting;
  }

  /** A hint heard since `since` that `reach` may take and `who` (if given) has not tried; a null hint when some were not kept. */
  private heardSince(since: number, who: Claimant | undefined, reach: WaiterReach): Wake | undefined {
    if (since >= this.heard) return undefined;
    // More hints than are kept came meanwhile: one of them may have been for this agent.
    if (this.recent.length === 0 || this.recent[0]!.seq > since + 1) return { hint: null, tried: new WeakSet() };
    return this.recent.find((r) => r.seq > since && !(who && r.wake.tried.has(who)) && (!r.wake.hint?.group || covers(reach, r.wake.hint.group)))?.wake;
  }

  /**
   * Wake `count` waiters covering the hint's group that have not tried it, oldest first; a hint
   * without a group (a reconnect, a payload naming none) wakes all of them.
   */
  private dispatch(wake: Wake): void {
    const group = wake.hint?.group;
    let left = group ? wake.hint!.count : Infinity;
    for (const w of [...this.waiting]) {
      if (left <= 0) break;
      if (group && (!covers(w.reach, group) || wake.tried.has(w.who))) continue;
      w.wake(wake);
      left--;
    }
  }
}

/** One key per reach: the same capabilities, models and tenants in any order. */
function reachKey(reach: WaiterReach): string {
  return JSON.stringify([[...reach.capabilities].sort(), [...reach.models].sort(), reach.tenants ? [...reach.tenants].sort() : null]);
}

/**
 * True when an agent with `reach` may take tasks of `group`, as far as the claim's own check goes
 * without the database: the group's capabilities are the agent's, a group naming models shares
 * one with the agent (or the agent takes any), and its tenant is one the agent serves (a hint that names no tenant:
 * any). Budgets, limits, quotas and pauses are left to the claim.
 */
export function covers(reach: WaiterReach, group: { capabilities: readonly string[]; models: readonly string[]; tenant?: string | null }): boolean {
  if (group.tenant && reach.tenants && !reach.tenants.includes(group.tenant)) return false;
  if (!group.capabilities.every((c) => reach.capabilities.includes(c))) return false;
  return group.models.length === 0 || reach.models.includes('*') || group.models.some((m) => reach.models.includes(m));
}
