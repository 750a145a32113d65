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
 * the client hangs up or the server stops, and claims nothing more once the request's token is revoked.
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
  try {
    return await readyClaimWait(d.claimWaiters, d.db, d.log, {
      who: p.who, reach: p.reach, since: p.since, waitSec: p.waitSec, signal: gone.signal, claim: p.claim,
      stillAllowed: p.tokenId ? () => tokenLive(d.db, p.tokenId!) : undefined,
    });
  } finally {
    p.reply.raw.off('close', hangUp);
    d.closing.removeEventListener('abort', stopping);
  }
}
