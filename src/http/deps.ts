import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import type { MetricsCollector } from '../observability/metrics.js';
import type { ClaimWaiters } from '../claim-wait/waiters.js';
import type { EventHub } from './event-hub.js';
import type { StreamFeeds } from './stream-feeds.js';
import type { TokenRevocations } from '../auth/revocations.js';

/** What every route module is given: the database, the logger, the event stream's hub, the metrics registry, the waiting claims, token revocations and the server's settings. */
export interface HttpDeps {
  db: Db;
  log: Logger;
  hub: EventHub;
  /** The task streams this node's readers follow: one feed per stream, on the node's LISTEN connection. */
  streams: StreamFeeds;
  metrics: MetricsCollector;
  /** Claims waiting for READY work (`wait_sec`): the node's one wait-for-work mechanism, on its LISTEN connection. */
  claimWaiters: ClaimWaiters;
  /** Ends what a token has open (streams, MCP sessions, long polls) when it is revoked. */
  revocations: TokenRevocations;
  /** Aborted when the server closes: its long polls answer with what they have. */
  closing: AbortSignal;
  /** Backpressure for POST /api/dags (see SubmitOptions.maxQueued). */
  maxQueued?: number;
  /** Directories beyond the server's working directory that paths in a posted DAG may reach (DAGENT_FILE_ROOTS). */
  fileRoots?: readonly string[];
}
