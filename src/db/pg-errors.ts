// Socket errors, and the SQLSTATEs of a server that is shutting down, starting up, full (53300 too many
// connections, once the pool has waited its connect timeout for room: patient-pool.ts) or unreachable.
const CONNECTION_LOST_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', '53300', '57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006']);

/**
 * True when an error means "the database could not be reached", not "the
 * statement was wrong": worth retrying once the server is back. Drizzle wraps
 * driver errors, so the cause is checked too.
 */
export function isConnectionLost(e: unknown): boolean {
  for (let err = e as { code?: string; message?: string; cause?: unknown } | undefined, depth = 0; err && depth < 4; err = err.cause as typeof err, depth++) {
    if (err.code && CONNECTION_LOST_CODES.has(err.code)) return true;
    if (/Connection terminated|connection is closed|Client has encountered a connection error|Client was closed|timeout exceeded when trying to connect|Query read timeout/i.test(err.message ?? '')) return true;
  }
  return false;
}

// deadlock_detected, serialization_failure: the transaction was rolled back whole and may simply be run again.
const TRANSIENT_CODES = new Set(['40P01', '40001']);

/** A deadlock or serialization failure: PostgreSQL rolled the transaction back, and running it again is safe. */
export function isTransientConflict(e: unknown): boolean {
  const err = e as { code?: string; cause?: { code?: string } } | undefined;
  return TRANSIENT_CODES.has(err?.code ?? '') || TRANSIENT_CODES.has(err?.cause?.code ?? '');
}

/** The driver's message for an error drizzle wrapped (its own message repeats the whole statement). */
export function errorMessage(e: unknown): string {
  const err = e as { message?: string; cause?: { message?: string } } | undefined;
  return err?.cause?.message ?? err?.message ?? String(e);
}
