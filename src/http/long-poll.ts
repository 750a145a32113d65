import type { FastifyReply } from 'fastify';
import { tokenLive } from '../auth/tokens.js';
import { claimWhenReady as readyClaimWait } from '../claim-wait/claim-when-ready.js';
import type { Claimant, WaiterReach } from '../claim-wait/waiters.js';
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
 * A claim request's long poll (`wait_sec`), as every waiting claim of the node waits (claim-wait/): it ends when
 * the client hangs up, the server stops or the request's token is revoked, and claims nothing more once it is.
 */
export async function claimWhenReady<T>(d: HttpDeps, p: LongPoll<T>): Promise<T[]> {
  const gone = new AbortController();
  const hangUp = () => gone.abort();
  p.reply.raw.once('close', hangUp);
  // The client may have gone while the first claim ran: 'close' came before anyone listened.
  if (p.reply.raw.destroyed || p.reply.request.raw.socket?.destroyed) gone.abort();
  const stopping = () => gone.abort();
  d.closing.addEventListener('abort', stopping, { once: true });
  if (d.closing.aborted) gone.abort();
  // A token revoked mid-wait ends the wait when the revocation commits (and is checked again before each claim).
  const unwatch = p.tokenId ? d.revocations.watch(p.tokenId, () => gone.abort(), { recheck: false }) : undefined;
  try {
    return await readyClaimWait(d.claimWaiters, d.db, d.log, {
      who: p.who, reach: p.reach, since: p.since, waitSec: p.waitSec, signal: gone.signal, claim: p.claim,
      stillAllowed: p.tokenId ? () => tokenLive(d.db, p.tokenId!) : undefined,
    });
  } finally {
    p.reply.raw.off('close', hangUp);
    unwatch?.();
    d.closing.removeEventListener('abort', stopping);
  }
}
