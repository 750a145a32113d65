import type { Logger } from 'pino';
import { CLAIM_WAIT_DEFAULTS } from '../config/index.js';
import type { Db } from '../db/handle.js';
import { readyForReach, readyInGroup } from '../db/queries/ready-hint.js';
import type { Claimant, ClaimWaiters, Wake, WaiterReach } from './waiters.js';

/** A long poll: an agent's claim that may wait for work (HTTP `wait_sec`, MCP `next_task`). */
export interface ReadyClaim<T> {
  who: Claimant;
  reach: WaiterReach;
  /** waiters.mark() taken before the claim that found nothing. */
  since: number;
  waitSec: number;
  /** Aborted when the caller gives up (an HTTP client hangs up, an MCP session ends, the node stops). */
  signal?: AbortSignal;
  /** Asked before each claim: false ends the poll with nothing (a token revoked mid-wait claims nothing more). */
  stillAllowed?: () => Promise<boolean>;
  claim: () => Promise<T[]>;
}

/**
 * Wait for READY hints this agent can take (waiters.ts), claiming after each, until it claims something,
 * `waitSec` pass or the caller gives up. While nothing READY is for this agent, no claim statement runs. When
 * READY work it covers is there but its claim got none (a concurrency key, its budget, a row another claim held
 * for a moment), no hint will say when that changes: it claims again every `blockedRecheckSec` instead. Counted
 * against the node's and the agent's ceilings of waiting claims (false from `enter`: answered with nothing).
 */
export async function claimWhenReady<T>(waiters: ClaimWaiters, db: Db, log: Logger | undefined, p: ReadyClaim<T>): Promise<T[]> {
  if (!waiters.enter(p.who.agentId)) return [];
  const deadline = Date.now() + p.waitSec * 1000;
  let since = p.since;
  // Is READY work this agent covers there? Noted when not, so the node's next long poll of this reach waits
  // without a claim statement until a hint says otherwise (waiters.nothingReadyFor).
  const readyThere = async () => {
    const before = await waiters.mark();
    const ready = await readyForReach(db, p.reach.capabilities, p.reach.models, p.reach.tenants ?? null);
    if (!ready) waiters.noteNothingReady(p.reach, before);
    return ready;
  };
  try {
    let blocked = waiters.nothingReadyFor(p.reach) ? false : await readyThere();
    for (;;) {
      const left = deadline - Date.now();
      const recheck = CLAIM_WAIT_DEFAULTS.blockedRecheckSec * 1000 * (0.8 + Math.random() * 0.4);
      const end = await waiters.wait(p.who, p.reach, since, blocked ? Math.min(left, recheck) : left, p.signal);
      if (p.signal?.aborted || Date.now() >= deadline || waiters.closing) {
        // Woken, but the caller left, time is up or the node is stopping: the hint is not this poll's to drop.
        if (end.woken) handOnIfReady(waiters, db, log, p.who, end.wake);
        return [];
      }
      if (!end.woken) {
        // A recheck: claim only if what blocked it is still READY (another agent may have taken it meanwhile).
        blocked = await readyThere();
        if (!blocked) continue;
      }
      if (p.stillAllowed && !(await p.stillAllowed())) {
        if (end.woken) handOnIfReady(waiters, db, log, p.who, end.wake);
        return [];
      }
      since = await waiters.mark();
      let tasks: T[] = [];
      try {
        tasks = await p.claim();
      } finally {
        // Whatever this claim took (or if it failed), work of the hint's group may be left for the next in line.
        if (end.woken) handOnIfReady(waiters, db, log, p.who, end.wake, tasks.length > 0);
      }
      if (tasks.length > 0) return tasks;
      blocked = await readyThere();
    }
  } finally {
    waiters.leave(p.who.agentId);
  }
}

/**
 * A woken claim is done with its hint: if tasks of the hint's group are still READY (this agent could not take
 * them, or took another group's), the turn goes to the next waiting claim that covers it. When they are gone, the
 * hint ends here, so one READY task never walks every waiting agent. A claim that `took` tasks of a hint other
 * processes shared asks a moment later (waiters.lookAgainMs): their woken claims, running as this
 * one did, would still show their tasks READY, and each would cost a claim here that finds nothing.
 */
export function handOnIfReady(waiters: ClaimWaiters, db: Db, log: Logger | undefined, who: Claimant, wake: Wake, took = false): void {
  const key = wake.hint?.group?.key;
  if (key === undefined) return;
  const probe = () => void readyInGroup(db, key).then((ready) => {
    if (ready) waiters.passOn(who, wake);
  }).catch((err: unknown) => log?.warn({ err, agentId: who.agentId }, 'READY probe failed; the hint goes no further'));
  if (took && wake.shared) setTimeout(probe, waiters.lookAgainMs).unref();
  else probe();
}

/** ClaimWaiters' `readyInGroup` over `db`: with it, a process wakes only its part of each READY hint. */
export function groupProbe(db: Db): (capKey: string) => Promise<boolean> {
  return (capKey) => readyInGroup(db, capKey);
}
