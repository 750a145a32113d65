import type { FastifyReply } from 'fastify';
import { CLAIM_WAIT_DEFAULTS } from '../config/index.js';
import { readyForReach, readyInGroup } from '../db/queries/ready-hint.js';
import { tokenLive } from '../auth/tokens.js';
import type { Claimant, Wake, WaiterReach } from './claim-waiters.js';
import type { HttpDeps } from './deps.js';

export interface LongPoll<T> {
  who: Claimant;
  reach: WaiterReach;
  /** claimWaiters.mark() taken before the claim that found nothing. */
  since: number;
  waitSec: number;
  /** The request's token, checked again before each claim: a token revoked mid-wait claims nothing more. */
  tokenId: string | undefined;
  reply: FastifyReply;
  claim: () => Promise<T[]>;
}

/**
 * A long poll (`wait_sec`): wait for READY hints this agent can take (claim-waiters.ts), claiming after
 * each, until it claims something, `waitSec` pass or the client hangs up. While nothing READY is for
 * this agent, no claim statement runs. When READY work it covers is there but its claim got none (a
 * concurrency key, its budget, a row another claim held for a moment), no hint will say when that
 * changes: it claims again every `blockedRecheckSec` instead.
 */
export async function claimWhenReady<T>(d: HttpDeps, p: LongPoll<T>): Promise<T[]> {
  const waiters = d.claimWaiters;
  if (!waiters.enter(p.who.agentId)) return [];
  const deadline = Date.now() + p.waitSec * 1000;
  const gone = new AbortController();
  const hangUp = () => gone.abort();
  p.reply.raw.once('close', hangUp);
  // The client may have gone while the first claim ran: 'close' came before anyone listened.
  if (p.reply.raw.destroyed || p.reply.request.raw.socket?.destroyed) gone.abort();
  let since = p.since;
  try {
    let blocked = await readyForReach(d.db, p.reach.capabilities, p.reach.models);
    for (;;) {
      const left = deadline - Date.now();
      const recheck = CLAIM_WAIT_DEFAULTS.blockedRecheckSec * 1000 * (0.8 + Math.random() * 0.4);
      const end = await waiters.wait(p.who, p.reach, since, blocked ? Math.min(left, recheck) : left, gone.signal);
      if (gone.signal.aborted || Date.now() >= deadline || waiters.closing) {
        // Woken, but the client left, time is up or the node is stopping: the hint is not this request's to drop.
        if (end.woken) handOn(d, p.who, end.wake);
        return [];
      }
      if (!end.woken) {
        // A recheck: claim only if what blocked it is still READY (another agent may have taken it meanwhile).
        blocked = await readyForReach(d.db, p.reach.capabilities, p.reach.models);
        if (!blocked) continue;
      }
      if (p.tokenId && !(await tokenLive(d.db, p.tokenId))) {
        if (end.woken) handOn(d, p.who, end.wake);
        return [];
      }
      since = await waiters.mark();
      let tasks: T[] = [];
      try {
        tasks = await p.claim();
      } finally {
        // Whatever this claim took (or if it failed), work of the hint's group may be left for the next in line.
        if (end.woken) handOn(d, p.who, end.wake);
      }
      if (tasks.length > 0) return tasks;
      blocked = await readyForReach(d.db, p.reach.capabilities, p.reach.models);
    }
  } finally {
    p.reply.raw.off('close', hangUp);
    waiters.leave(p.who.agentId);
  }
}

/**
 * A woken claim is done with its hint: if tasks of the hint's group are still READY (this agent could
 * not take them, or took another group's), the turn goes to the next waiting claim that covers it.
 * When they are gone, the hint ends here, so one READY task never walks every waiting agent.
 */
function handOn(d: HttpDeps, who: Claimant, wake: Wake): void {
  const key = wake.hint?.group?.key;
  if (key === undefined) return;
  void readyInGroup(d.db, key).then((ready) => {
    if (ready) d.claimWaiters.passOn(who, wake);
  }).catch((err: unknown) => d.log.warn({ err, agentId: who.agentId }, 'long poll: READY probe failed; the hint goes no further'));
}
