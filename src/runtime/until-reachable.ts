import type { Logger } from 'pino';
import { errorMessage, isConnectionLost, isTransientConflict } from '../db/pg-errors.js';

/** Retry backoff while the database is unreachable: from UNREACHABLE_RETRY_MIN_MS doubling to UNREACHABLE_RETRY_MAX_MS. */
export const UNREACHABLE_RETRY_MIN_MS = 200;
export const UNREACHABLE_RETRY_MAX_MS = 5_000;
/** Past this, give up: the lease has long lapsed and the reaper has retried the task elsewhere. */
export const UNREACHABLE_GIVE_UP_MS = 10 * 60_000;

/**
 * Run `fn` until it reaches the database. Only "could not reach the database"
 * errors (a restart, a network cut) and transient ones (deadlock, serialization
 * failure: safe to repeat, as every transition is guarded by state and fencing
 * token) are retried; every other error, including a refused transition, is the caller's to handle. A finished task's result must
 * not be dropped because the database blinked: that would throw away the work.
 */
export async function untilReachable<T>(what: string, fn: () => Promise<T>, log: Logger, giveUpMs = UNREACHABLE_GIVE_UP_MS): Promise<T> {
  const started = Date.now();
  for (let failures = 0; ; failures++) {
    try {
      return await fn();
    } catch (e) {
      if (!(isConnectionLost(e) || isTransientConflict(e)) || Date.now() - started > giveUpMs) throw e;
      const delay = Math.min(UNREACHABLE_RETRY_MAX_MS, UNREACHABLE_RETRY_MIN_MS * 2 ** failures);
      log.warn({ err: errorMessage(e), retryInMs: delay }, `${what}: ${isTransientConflict(e) ? 'transient database error' : 'database unreachable'}, retrying`);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
