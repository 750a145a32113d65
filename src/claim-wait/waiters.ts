import type { Logger } from 'pino';
import { READY_CHANNEL } from '../db/statement.js';
import { readyHintParse, type ReadyHint } from '../db/ready-hint-payload.js';
import { ReadyListener } from '../db/ready-listener.js';
import type { ListenerRoster } from '../db/queries/listener-roster.js';
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

/**
 * A hint on its way through this node's waiters: who has tried it already (each waiting claim tries a hint once), and
 * how many claims that were running when it came may still take it (`owed`: this node's part of the hint that no
 * waiter took; unbounded when the node takes hints whole), and whether other processes took parts of it (`shared`).
 */
export interface Wake { hint: ReadyHint | null; tried: WeakSet<Claimant>; owed: number; shared: boolean }

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
 * and how many of its tasks became READY. Every listening process hears it; each wakes its part of the count
 * (hintShare: the parts of all processes add up to the count) among the waiters whose agent covers the group,
 * oldest first, so one READY task costs one claim statement, not one per waiting agent or per node. Once a woken
 * waiter's claim is done, its turn may go on to the next (`passOn`, through handOnIfReady), so a part that a
 * process had no waiter for is taken by another's chain; a process whose part is nothing looks a moment later
 * whether the group is still READY, and wakes one if so. A hint without a group, and every reconnect of the
 * LISTEN connection (hints sent meanwhile are lost), wakes everyone.
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
   * `readyInGroup`: whether a claim group has READY tasks (claim-when-ready.ts, groupProbe). With it, the process
   * wakes only its part of a hint (hintShare); without it, the whole count, as if no other process listened.
   * `lookAgainMs`: CLAIM_WAIT_DEFAULTS.shareLookAgainMs unless given (a test that checks who claims, not how soon).
   */
  constructor(private readonly o: {
    databaseUrl: string; log?: Logger; listener?: ReadyListener; perAgent: number; max: number;
    readyInGroup?: (capKey: string) => Promise<boolean>; lookAgainMs?: number;
  }) {}

  /** How long after a shared hint a process looks again whether its group is still READY (hintShare). */
  get lookAgainMs(): number {
    return this.o.lookAgainMs ?? CLAIM_WAIT_DEFAULTS.shareLookAgainMs;
  }

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
    if (missed) {
      missed.owed--;
      return { woken: true, wake: missed };
    }
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

  /**
   * `who` was woken by `wake` and is done with it, and the group is still READY: the turn goes to the next waiter
   * covering the group that has not tried it, or to the next claim that was running when the hint came.
   */
  passOn(who: Claimant, wake: Wake): void {
    wake.tried.add(who);
    if (wake.hint?.group) this.handOn(wake);
  }

  /** A READY probe found nothing `reach` may take; `since` is a mark taken before it. */
  noteNothingReady(reach: WaiterReach, since: number): void {
    if (this.nothingReady.size >= NOTHING_READY_MAX) this.nothingReady.clear();
    this.nothingReady.set(reachKey(reach), { since, at: Date.now() });
  }

  /**
   * True when this node knows that nothing is READY for `reach` that no claim has been woken for: a probe found
   * nothing (noteNothingReady), and no hint it may take has come since that this node still owes a claim (a part no
   * waiter took, a turn handed on with no one to take it, a whole hint of a node that takes hints whole), nor more
   * hints than are kept, nor a reconnect (a hint without a group), and for at most
   * CLAIM_WAIT_DEFAULTS.nothingReadyTrustSec. Every task that becomes READY sends a hint, and every part of it goes
   * to a woken claim or is owed, so a long poll can then wait without running a claim first: an idle fleet's
   * renewed polls, and a busy one's agents coming back while the work is already being claimed, cost no claim
   * statement each (docs/benchmarks.md, "A fleet on several nodes").
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
      if (this.o.readyInGroup) this.listener.rosterKeep();
      this.unsubscribe = this.listener.subscribe((payload) => {
        const wake: Wake = { hint: payload === undefined ? null : readyHintParse(payload), tried: new WeakSet(), owed: Infinity, shared: false };
        this.recent.push({ seq: ++this.heard, wake });
        if (this.recent.length > RECENT_MAX) this.recent.shift();
        this.heardDispatch(wake, payload ?? '');
      }, READY_CHANNEL);
      if (this.own) await this.listener.start();
    })();
    return this.starting;
  }

  /**
   * A hint heard since `since` that `reach` may take, that `who` (if given) has not tried and that this node still
   * owes a claim; a null hint when some were not kept.
   */
  private heardSince(since: number, who: Claimant | undefined, reach: WaiterReach): Wake | undefined {
    if (since >= this.heard) return undefined;
    // More hints than are kept came meanwhile: one of them may have been for this agent.
    if (this.recent.length === 0 || this.recent[0]!.seq > since + 1) return { hint: null, tried: new WeakSet(), owed: Infinity, shared: false };
    return this.recent.find((r) => r.seq > since && !(who && r.wake.tried.has(who)) && r.wake.owed > 0
      && (!r.wake.hint?.group || covers(reach, r.wake.hint.group)))?.wake;
  }

  /**
   * A hint from the LISTEN connection: its whole count when the process takes hints whole (no `readyInGroup`, or no
   * other process listens, or it names no group); else this process's part (hintShare). Whatever part found no
   * waiter is owed to the claims running now (wait's `missed`). A process whose part is nothing looks again after
   * its turn in the fallback order, in case the processes given the hint had no waiter for it.
   */
  private heardDispatch(wake: Wake, payload: string): void {
    const group = wake.hint?.group;
    const roster = this.listener?.roster;
    if (!group || !this.o.readyInGroup || !roster || roster.members <= 1) {
      this.dispatch(wake, group ? wake.hint!.count : Infinity);
      return;
    }
    const share = hintShare(wake.hint!.count, roster, hintSeed(payload));
    wake.shared = true;
    wake.owed = share.wake - this.dispatch(wake, share.wake);
    if (share.wake > 0) return;
    const turn = Math.min(share.lookAgainStep, CLAIM_WAIT_DEFAULTS.shareLookAgainTurnsMax);
    const timer = setTimeout(() => this.lookAgain(wake), turn * this.lookAgainMs);
    timer.unref();
  }

  /**
   * The part of a hint this process was not given may have gone to one with no waiter for it: if a waiter here
   * covers the group, ask whether it is still READY (one probe) and hand it on if so; if none does, owe it to the
   * claims running now instead, for free.
   */
  private lookAgain(wake: Wake): void {
    const group = wake.hint!.group!;
    if (this.closed) return;
    if (!this.waiterFor(wake)) {
      wake.owed++;
      return;
    }
    void this.o.readyInGroup!(group.key).then((ready) => {
      if (ready) this.handOn(wake);
    }).catch((err: unknown) => this.o.log?.warn({ err, group: group.key }, 'READY probe failed; the hint goes no further here'));
  }

  /** Whether a waiter here covers the hint's group and has not tried it (read in place: waking none, it copies nothing). */
  private waiterFor(wake: Wake): boolean {
    const group = wake.hint!.group!;
    for (const w of this.waiting) if (covers(w.reach, group) && !wake.tried.has(w.who)) return true;
    return false;
  }

  /** One more of the hint's group is READY for this node: the next waiter that has not tried it, or a running claim. */
  private handOn(wake: Wake): void {
    if (this.dispatch(wake, 1) === 0) wake.owed++;
  }

  /**
   * Wake up to `count` waiters covering the hint's group that have not tried it, oldest first (a hint without a group,
   * a reconnect or a payload naming none, wakes all of them); returns how many woke.
   */
  private dispatch(wake: Wake, count: number): number {
    const group = wake.hint?.group;
    let woken = 0;
    for (const w of [...this.waiting]) {
      if (woken >= count) break;
      if (group && (!covers(w.reach, group) || wake.tried.has(w.who))) continue;
      w.wake(wake);
      woken++;
    }
    return woken;
  }
}

/**
 * This process's part of a hint that `count` tasks became READY, when `roster.members` processes hear it: the count
 * dealt round the roster from a place the hint's own text decides (`seed`), so every process, reading the same roster
 * and payload, takes a different part and the parts add up to the count. A process whose part is nothing gets its
 * step in the order of those that look again (1, 2, …): the nearest looks first.
 */
export function hintShare(count: number, roster: ListenerRoster, seed: number): { wake: number; lookAgainStep: number } {
  const n = roster.members;
  const place = (((roster.rank - seed) % n) + n) % n;
  const wake = Math.floor(count / n) + (place < count % n ? 1 : 0);
  return { wake, lookAgainStep: wake > 0 ? 0 : place - (count % n) + 1 };
}

/** A number every process derives alike from a hint's payload (it carries the clock in µs, so hints differ). */
export function hintSeed(payload: string): number {
  let h = 0;
  for (let i = 0; i < payload.length; i++) h = (Math.imul(h, 31) + payload.charCodeAt(i)) | 0;
  return h >>> 0;
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
