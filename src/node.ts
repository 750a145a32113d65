import type { Logger } from 'pino';
import type { Database } from './db/handle.js';
import { ReadyListener } from './db/ready-listener.js';
import { groupProbe } from './claim-wait/claim-when-ready.js';
import { ClaimWaiters } from './claim-wait/waiters.js';
import { CLAIM_WAIT_DEFAULTS } from './config/index.js';
import { EVENTS_CHANNEL, READY_CHANNEL, REVOKED_CHANNEL, STREAM_CHANNEL } from './db/statement.js';
import type { HttpServer } from './http/server.js';
import { maintenanceServices, type MaintenanceService } from './maintenance/index.js';
import type { AgentRunner } from './runtime/agent-runner.js';
import { AgentFleet, type FleetMember } from './runtime/fleet.js';

/**
 * One dagent process, assembled in one place: the maintenance loops, the process's one LISTEN connection, the
 * agents it runs and the HTTP API, started in that order and stopped in the reverse one. `dagent up`, `dagent
 * agent run` and `dagent demo` are each a call of nodeStart; a program embedding dagent calls it too.
 */

export interface NodeOptions {
  /** The database, open (databaseOpen). The node does not close it. */
  database: Pick<Database, 'db' | 'url' | 'sessionUrl'>;
  log: Logger;
  /** The agents this process runs, each with its own claim loop. Default none. */
  agents?: FleetMember[];
  /** The agents' instance label: their ids are `<name>-<instance>` (DAGENT_AGENT_INSTANCE). Default the host name. */
  instance?: string;
  /** The agents' fallback poll interval when no notification arrives (ms). Default AgentRunner's. */
  pollIntervalMs?: number;
  /**
   * Run the maintenance loops here. Default true: every dagent process runs them, and each loop's lease gives it to
   * one process at a time (docs/operations.md), so retries, reaping and schedules never depend on one process.
   */
  maintenance?: boolean;
  /** The backpressure limit (DAGENT_MAX_QUEUED): the scheduler's fires and the HTTP API's submissions obey it. Default none. */
  maxQueued?: number;
  /** The retention period (DAGENT_RETENTION) in seconds; null or absent: the retention loop prunes nothing. */
  retentionSec?: number | null;
  /** DAGENT_RETENTION_STREAMS in seconds; null: streams go with their DAG. */
  retentionStreamsSec?: number | null;
  /**
   * Seconds each maintenance loop's lease lasts without a renewal (DAGENT_LOOP_LEASE_SEC): when this process is
   * killed, its loops move to another after this long. Default LOOP_LEASE_DEFAULTS.ttlSec.
   */
  loopLeaseSec?: number;
  /**
   * Where the agents make tasks' git worktrees (DAGENT_WORKSPACE_ROOT), which the workspace-reclaimer loop sweeps,
   * how long one kept after a failure stays (DAGENT_RETENTION_WORKSPACES, seconds; null: until removed by hand), and
   * the repository URLs the agents may clone (DAGENT_WORKSPACE_REPO_URLS). Default CONFIG_DEFAULTS.workspaceRoot,
   * WORKSPACE_DEFAULTS.keptPeriod and none.
   */
  workspaces?: { root?: string; keptSec?: number | null; repoUrls?: readonly string[] };
  /** Serve the HTTP API, the dashboard and the metrics on `port` and `host`. Absent: no HTTP. */
  http?: {
    port: number;
    host: string;
    /** Directories beyond the working directory that paths in a posted DAG may reach (DAGENT_FILE_ROOTS). Default none. */
    fileRoots?: readonly string[];
    /** Serve /metrics without a token. Default false. */
    metricsPublic?: boolean;
    /** Parse every JSON answer against its route's response schema, a mismatch a 500 (a test suite's; DAGENT_CHECK_RESPONSES). Default false. */
    checkResponses?: boolean;
  };
  /**
   * An agent whose preflight says it cannot work here (a missing API key) is left out and reported to this, and the
   * others start. Without it, such an agent fails the start.
   */
  onUnready?: (message: string) => void;
}

/** A started node. */
export interface DagentNode {
  /** The maintenance loops it runs, in start order. */
  readonly loops: readonly MaintenanceService[];
  /** The agents it runs (less any onUnready left out). */
  readonly agents: readonly AgentRunner[];
  /** The HTTP API's base URL, when it serves one. */
  readonly url?: string;
  /**
   * Stop: the HTTP server, then the agents (running tasks get `graceMs` to finish, then are released), then the
   * LISTEN connection, then the loops (a tick in progress finishes; leases are given up). Idempotent.
   */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Start a node. When a step fails (a port in use, an agent's registration refused), everything started before it
 * is stopped again and the error is thrown: nothing this call started is left running.
 */
export async function nodeStart(o: NodeOptions): Promise<DagentNode> {
  // Loaded only for a node that serves HTTP (an agent process never loads the server and its routes), and from the
  // start, so loading it overlaps the loops' and the agents' start.
  const httpModule = o.http ? import('./http/server.js') : undefined;
  httpModule?.catch(() => {}); // a failure is thrown where it is awaited
  const loops = o.maintenance === false ? [] : maintenanceServices(o.database.db, o.log, { maxQueued: o.maxQueued, retentionSec: o.retentionSec, retentionStreamsSec: o.retentionStreamsSec, leaseSec: o.loopLeaseSec, workspaces: o.workspaces });
  const members = o.agents ?? [];
  // One LISTEN connection for the whole process: the agents' wake-ups, the event stream, the waiting claims and token revocations share it.
  const listener = members.length > 0 || o.http
    ? new ReadyListener({ url: o.database.sessionUrl, log: o.log, channels: o.http ? [READY_CHANNEL, EVENTS_CHANNEL, REVOKED_CHANNEL, STREAM_CHANNEL] : [READY_CHANNEL] })
    : undefined;
  // One place to wait for work, on that connection, for the agents' idle claim loops, HTTP long polls and MCP sessions.
  const waiters = listener
    ? new ClaimWaiters({ databaseUrl: o.database.sessionUrl, log: o.log, listener, perAgent: CLAIM_WAIT_DEFAULTS.waitingPerAgent, max: CLAIM_WAIT_DEFAULTS.waitingMax, readyInGroup: groupProbe(o.database.db) })
    : undefined;
  const fleet = members.length > 0 ? new AgentFleet(o.database, members, { log: o.log, listener, waiters, instance: o.instance, pollIntervalMs: o.pollIntervalMs, workspaces: o.workspaces }) : undefined;
  let http: HttpServer | undefined;
  let stopped: Promise<void> | undefined;
  const stop = (graceMs?: number): Promise<void> => stopped ??= (async () => {
    await http?.close().catch((err: unknown) => o.log.warn({ err }, 'HTTP server close failed'));
    await fleet?.stop(graceMs);
    await waiters?.close();
    await listener?.stop();
    await Promise.all(loops.map((s) => s.stop()));
  })();
  try {
    loops.forEach((s) => s.start());
    await listener?.start();
    await fleet?.start({ onUnready: o.onUnready });
    let url: string | undefined;
    if (o.http && httpModule) {
      const { httpServerCreate } = await httpModule;
      http = await httpServerCreate({
        db: o.database.db, databaseUrl: o.database.sessionUrl, log: o.log, maxQueued: o.maxQueued, fileRoots: o.http.fileRoots,
        metricsPublic: o.http.metricsPublic, checkResponses: o.http.checkResponses, listener, claimWaiters: waiters,
      });
      url = await http.listen(o.http.port, o.http.host);
    }
    return { loops, agents: fleet?.runners ?? [], url, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
