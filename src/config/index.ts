import os from 'node:os';
import { z } from 'zod';
import { InvalidInputError } from '../errors.js';
import { LIMITS_INVALID_ENV } from './limits.js';

import { CONFIG_DEFAULTS, LOG_LEVELS, PREPARED_STATEMENTS } from './defaults.js';
import { DURATION_PATTERN, durationSeconds } from '../durations.js';

export { CONFIG_DEFAULTS, LOG_LEVELS, type LogLevel } from './defaults.js';
export { LIMITS, LIMIT_DEFAULTS, limitEnvName } from './limits.js';

/**
 * Retention (DAGENT_RETENTION, `dagent prune`): completed and cancelled DAGs finished more than `period` ago go with
 * their tasks, attempts, outputs, logs and events; so do events of no DAG, finished webhook deliveries and agents
 * offline for that long (unless they have a budget). DAGs with an open dead letter stay until a person resolves
 * it. The retention loop runs every `intervalMs` for at most `passMs`, marking up to `dagsPerPass` DAGs at a time
 * and deleting `batchTasks` tasks (or `batchRows` log lines and other rows) per statement. A period shorter than `minSec` is refused for the loop (a typo would empty the history).
 */
export const RETENTION_DEFAULTS = {
  period: '30d',
  /** Stream chunks of finished tasks (DAGENT_RETENTION_STREAMS) go sooner than their DAG: they are the bulk, and read live. */
  streamsPeriod: '7d',
  minSec: 3600,
  intervalMs: 60_000,
  /** A pass of the loop stops after this long (between two statements) and goes on at the next tick. */
  passMs: 20_000,
  dagsPerPass: 100,
  batchTasks: 1_000,
  batchRows: 5_000,
} as const;

/**
 * A retention period as written (`30d`, `12h`, or `off`): its seconds, null for off, or what is wrong with it.
 * A unit is required: a bare `30` would be thirty seconds.
 */
export function retentionParse(raw: string, minSec = 0): number | null | string {
  const s = raw.trim();
  if (s === 'off') return null;
  if (!DURATION_PATTERN.test(s)) return `expected a period like 30d, 12h or 90m (a unit is required), or off; got "${raw}"`;
  const sec = durationSeconds(s);
  if (sec < minSec) return `a period of at least ${minSec / 3600} hour(s), or off; got "${raw}"`;
  return sec;
}

/**
 * Workspaces (src/workspaces/): a task's git worktree is removed when its attempt ends, but one kept after a failure
 * (`keep: on_failure`) stays for `keptPeriod` after the attempt ended (DAGENT_RETENTION_WORKSPACES). The reclaim loop
 * looks for worktrees whose attempt ended every `intervalMs`. Worktree operations on one repository take its lock
 * file; a lock older than `lockStaleMs`, or whose process is gone, is taken over; a wait for it gives up after `lockWaitMs`.
 */
export const WORKSPACE_DEFAULTS = {
  keptPeriod: '3d',
  intervalMs: 60_000,
  lockWaitMs: 60_000,
  lockStaleMs: 10 * 60_000,
} as const;

/** What an agent id, and an instance label, may be made of (the HTTP API's path segment, a log field). */
export const AGENT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

/** An instance label: what an agent id allows, at most 64. */
export const AGENT_INSTANCE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/;

/** This machine's name as an agent instance label: the characters an agent id allows, at most 64. */
export function agentInstanceDefault(): string {
  const host = os.hostname().replace(/[^A-Za-z0-9_.:-]/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 64);
  return host || 'host';
}

/**
 * Maintenance loops on several nodes (maintenance/service.ts): each loop runs on the one process holding its lease,
 * which lasts `ttlSec` from its last renewal (DAGENT_LOOP_LEASE_SEC, `ttlMinSec` to `ttlMaxSec`). The holder renews
 * it at every tick and `renewsPerLease` times per lease (not past the lease into a tick that never ends); a holder
 * killed is replaced once its lease has lapsed, within a renewal interval or at another process's next tick; a
 * holder stopping gives it up at once. A shorter lease moves a killed process's loops sooner, and moves them away
 * from a process that stalls (a long pause, a slow database) for that long.
 */
export const LOOP_LEASE_DEFAULTS = {
  ttlSec: 15,
  /** Shorter, each process would renew each of its loops' leases more than once a second. */
  ttlMinSec: 3,
  /** Longer, a killed process's loops (retries, reaping) would stop for more than an hour. */
  ttlMaxSec: 3600,
  renewsPerLease: 3,
} as const;

/** Process configuration, read from the environment. Every default comes from CONFIG_DEFAULTS. */
export const configSchema = z.object({
  /** Postgres URL. Default: unset, which starts (or joins) the embedded server in `dataDir`. */
  databaseUrl: z.string().url().optional(),
  /**
   * The same database without the pooler DATABASE_URL goes through (DATABASE_DIRECT_URL): set, DATABASE_URL is taken
   * for a transaction-mode pooler, and LISTEN and migrations connect here. Default: unset (no pooler).
   */
  databaseDirectUrl: z.string().url().optional(),
  /** Hot-path prepared statements (DAGENT_DB_PREPARED): `named` (default) or `unnamed` (default behind a pooler). */
  dbPrepared: z.enum(PREPARED_STATEMENTS).optional(),
  dataDir: z.string().min(1).default(CONFIG_DEFAULTS.dataDir),
  logLevel: z.enum(LOG_LEVELS).default(CONFIG_DEFAULTS.logLevel),
  /** Agent modules `dagent up` runs, from DAGENT_AGENTS (comma-separated; `file:concurrency` allowed). Default none. */
  agents: z.array(z.string().regex(/^[^:]+(:\d+)?$/, { error: 'expected file or file:concurrency' })).default([]),
  /** Backpressure: submissions are refused while READY + PENDING tasks number this many or more. Default: no limit. */
  maxQueued: z.coerce.number().int().min(1).optional(),
  httpPort: z.coerce.number().int().min(0).max(65535).default(CONFIG_DEFAULTS.httpPort),
  httpHost: z.string().min(1).default(CONFIG_DEFAULTS.httpHost),
  /**
   * Directories, besides a DAG file's own, that paths in a DAG (schema_file, a test step's cwd, a workspace's repo) may
   * reach (DAGENT_FILE_ROOTS, comma-separated). Default: the working directory, the project.
   */
  fileRoots: z.array(z.string().min(1)).default([...CONFIG_DEFAULTS.fileRoots]),
  /**
   * Hosts webhooks may be sent to even though they are loopback, link-local or cloud-metadata
   * addresses (DAGENT_WEBHOOK_ALLOW_HOSTS, comma-separated names or addresses). Default none.
   */
  webhookAllowHosts: z.array(z.string().min(1)).default([]),
  /** Connections in this process's pool (DAGENT_DB_POOL), besides its one LISTEN connection. */
  dbPool: z.coerce.number().int().min(2).max(1000).default(CONFIG_DEFAULTS.dbPool),
  /** The PostgreSQL schema of dagent's tables (DAGENT_DB_SCHEMA): a plain lower-case identifier. */
  dbSchema: z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/, { error: 'expected a plain lower-case identifier (letters, digits, _), at most 63 characters' })
    // pg_ names are PostgreSQL's own; public and information_schema are where an application's tables and the catalog live.
    .refine((s) => !s.startsWith('pg_') && s !== 'public' && s !== 'information_schema', { error: 'a schema of dagent\'s own: not public, information_schema or a pg_ name' })
    .default(CONFIG_DEFAULTS.dbSchema),
  /**
   * The instance label of the agents this process runs (DAGENT_AGENT_INSTANCE): an agent's id is `<name>-<label>`,
   * the same across restarts. Default: the host name.
   */
  agentInstance: z.string().regex(AGENT_INSTANCE_PATTERN, { error: 'letters, digits, _ . : - (at most 64, starting with a letter or digit)' }).optional(),
  /**
   * Check every JSON answer of the HTTP API against its route's response schema (DAGENT_CHECK_RESPONSES=1): a
   * mismatch is a 500 naming the route and the field. For test suites; production sends answers unparsed. Default off.
   */
  checkResponses: z.enum(['0', '1']).transform((v) => v === '1').default(false),
  /** Seconds after which finished DAGs, dag-less events, old webhook deliveries and long-offline agents are pruned (DAGENT_RETENTION); null: never. */
  retentionSec: z.string().transform((raw, ctx) => {
    const r = retentionParse(raw, RETENTION_DEFAULTS.minSec);
    if (typeof r === 'string') { ctx.addIssue({ code: 'custom', message: r }); return z.NEVER; }
    return r;
  }).default(durationSeconds(RETENTION_DEFAULTS.period)),
  /** Seconds after which the streams of finished tasks are deleted (DAGENT_RETENTION_STREAMS); null: they go with their DAG. */
  retentionStreamsSec: z.string().transform((raw, ctx) => {
    const r = retentionParse(raw, RETENTION_DEFAULTS.minSec);
    if (typeof r === 'string') { ctx.addIssue({ code: 'custom', message: r }); return z.NEVER; }
    return r;
  }).default(durationSeconds(RETENTION_DEFAULTS.streamsPeriod)),
  /** Where the agent runtime makes tasks' git worktrees (DAGENT_WORKSPACE_ROOT). Default: dagent-workspaces in the OS temporary directory. */
  workspaceRoot: z.string().min(1).default(CONFIG_DEFAULTS.workspaceRoot),
  /**
   * URLs (or prefixes of URLs: https://git.example.com/team/) of repositories this machine's agents may clone for a
   * workspace (DAGENT_WORKSPACE_REPO_URLS, comma-separated). Default none: only paths.
   */
  workspaceRepoUrls: z.array(z.string().min(1)).default([]),
  /** Seconds a worktree kept after a failure (keep: on_failure) stays once its attempt ended (DAGENT_RETENTION_WORKSPACES); null: until a person removes it. */
  retentionWorkspacesSec: z.string().transform((raw, ctx) => {
    const r = retentionParse(raw, RETENTION_DEFAULTS.minSec);
    if (typeof r === 'string') { ctx.addIssue({ code: 'custom', message: r }); return z.NEVER; }
    return r;
  }).default(durationSeconds(WORKSPACE_DEFAULTS.keptPeriod)),
  /** Seconds a maintenance loop's lease lasts without a renewal (DAGENT_LOOP_LEASE_SEC): how soon a killed process's loops move. */
  loopLeaseSec: z.coerce.number().int().min(LOOP_LEASE_DEFAULTS.ttlMinSec).max(LOOP_LEASE_DEFAULTS.ttlMaxSec).default(LOOP_LEASE_DEFAULTS.ttlSec),
});
export type Config = z.infer<typeof configSchema>;

/** A comma-separated list, its items trimmed and empty ones dropped. */
const commaList = (v: string): string[] => v.split(',').map((x) => x.trim()).filter(Boolean);

/**
 * Each setting configFromEnv reads: its Config key and its environment variable, each named once (the variable is
 * what an error names). `read` turns the text into what the schema parses; by default the text itself. An empty
 * variable counts as unset.
 */
const ENV_VARIABLES = [
  { key: 'databaseUrl', env: 'DATABASE_URL' },
  { key: 'databaseDirectUrl', env: 'DATABASE_DIRECT_URL' },
  { key: 'dbPrepared', env: 'DAGENT_DB_PREPARED' },
  { key: 'dataDir', env: 'DAGENT_DATA_DIR' },
  { key: 'logLevel', env: 'DAGENT_LOG_LEVEL' },
  { key: 'agents', env: 'DAGENT_AGENTS', read: commaList },
  { key: 'maxQueued', env: 'DAGENT_MAX_QUEUED' },
  { key: 'httpPort', env: 'DAGENT_HTTP_PORT' },
  { key: 'httpHost', env: 'DAGENT_HTTP_HOST' },
  { key: 'fileRoots', env: 'DAGENT_FILE_ROOTS', read: commaList },
  { key: 'webhookAllowHosts', env: 'DAGENT_WEBHOOK_ALLOW_HOSTS', read: commaList },
  { key: 'dbSchema', env: 'DAGENT_DB_SCHEMA' },
  { key: 'dbPool', env: 'DAGENT_DB_POOL' },
  { key: 'retentionSec', env: 'DAGENT_RETENTION' },
  { key: 'retentionStreamsSec', env: 'DAGENT_RETENTION_STREAMS' },
  { key: 'agentInstance', env: 'DAGENT_AGENT_INSTANCE' },
  { key: 'checkResponses', env: 'DAGENT_CHECK_RESPONSES' },
  { key: 'loopLeaseSec', env: 'DAGENT_LOOP_LEASE_SEC' },
  { key: 'workspaceRoot', env: 'DAGENT_WORKSPACE_ROOT' },
  { key: 'retentionWorkspacesSec', env: 'DAGENT_RETENTION_WORKSPACES' },
  { key: 'workspaceRepoUrls', env: 'DAGENT_WORKSPACE_REPO_URLS', read: commaList },
] as const satisfies ReadonlyArray<{ key: keyof Config; env: string; read?: (v: string) => unknown }>;

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): Config {
  if (LIMITS_INVALID_ENV.length) throw new InvalidInputError(`environment ${LIMITS_INVALID_ENV[0]}: expected a positive whole number`);
  const input = Object.fromEntries(ENV_VARIABLES.map((v) => {
    const raw = env[v.env] || undefined;
    return [v.key, raw !== undefined && 'read' in v ? v.read(raw) : raw];
  }));
  const parsed = configSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const variable = ENV_VARIABLES.find((v) => v.key === issue.path[0])?.env;
    throw new InvalidInputError(`environment ${variable ?? issue.path.join('.')}: ${issue.message}`);
  }
  if (parsed.data.databaseDirectUrl && !parsed.data.databaseUrl) {
    throw new InvalidInputError('environment DATABASE_DIRECT_URL: set without DATABASE_URL; it is the direct way to the database DATABASE_URL reaches through a pooler (unset both to use the embedded server)');
  }
  return parsed.data;
}

/**
 * What an agent token may do when its grant names no ceiling (a token created without --max-concurrent): a hostile
 * or broken agent holds at most `maxConcurrent` tasks at once, and leaves a claimed task unstarted for at most
 * `claimTtlMaxSec` before the reaper may take it back, so it cannot sit on the queue other agents would work.
 */
export const AGENT_TOKEN_DEFAULTS = {
  maxConcurrent: 32,
  claimTtlMaxSec: 300,
} as const;

/**
 * Long-poll claims (`POST /api/agents/:id/claim` with `wait_sec`): a request waits at most `waitMaxSec`. Each waiting
 * claim holds an HTTP connection and no database connection; an agent has at most `waitingPerAgent` of them at once
 * and a node `waitingMax`, so no agent can pile them up: past either, the claim answers at once with what it found.
 */
export const CLAIM_WAIT_DEFAULTS = {
  waitMaxSec: 30,
  /**
   * A waiting claim whose agent covers READY work it could not take (a concurrency key at its limit, its budget,
   * a row another claim held) claims again this often (± 20 %): nothing announces when that changes.
   */
  blockedRecheckSec: 2,
  /**
   * How long a node goes on trusting that nothing is READY for an agent's reach (a probe found nothing and no hint it
   * covers came since) before a long poll of that reach runs its claim again anyway: the net under a change to READY
   * that sent no hint, as the agent runtime's idle poll is.
   */
  nothingReadyTrustSec: 30,
  /**
   * A process given no part of a READY hint (waiters.ts, hintShare) looks whether its group is still READY this long
   * after it came, times its place in the order: long enough for a woken claim elsewhere to have taken the task (a
   * claim takes a few ms on a machine with room), short beside the wait it saves when the process given the part had
   * no waiter for it.
   */
  shareLookAgainMs: 25,
  /**
   * The latest turn to look again: with many processes given no part (agent processes beside the nodes), those past
   * it look together rather than one after another, so a task whose part went to a busy process waits at most this
   * many turns.
   */
  shareLookAgainTurnsMax: 4,
  waitingPerAgent: 4,
  waitingMax: 10_000,
} as const;

/**
 * The MCP server over HTTP (`/mcp`): each session holds a little memory and its tasks' heartbeats, so a process
 * keeps at most `sessionsMax` (each token at most `sessionsPerToken`), and closes one idle for `idleSec`.
 */
export const MCP_DEFAULTS = {
  sessionsMax: 1_000,
  sessionsPerToken: 16,
  idleSec: 15 * 60,
  /**
   * How long a `stream_write` call sends its batch again while the database cannot be reached (the same from_seq:
   * written once) before it answers an error; the batch is kept and sent first by the session's next write.
   */
  streamWriteRetrySec: 30,
} as const;

/**
 * A process's LISTEN connection (db/ready-listener.ts). When it drops it is made again after `reconnectMinMs`,
 * doubling, capped at `reconnectMaxMs`, with jitter.
 *
 * Health check: a network that dies without a reset (a NAT or firewall dropping the flow, a peer that vanished)
 * leaves a half-open connection: nothing errors, notifications just stop. Every `healthIntervalMs` the listener
 * NOTIFYs itself on a channel of its own; a ping not heard back within `healthTimeoutMs` means the connection is
 * dead, and it is dropped and made again. TCP keepalive (`keepaliveDelayMs`) is the kernel's own, slower, second net.
 */
export const LISTENER_DEFAULTS = {
  reconnectMinMs: 100,
  reconnectMaxMs: 5_000,
  healthIntervalMs: 2_000,
  healthTimeoutMs: 3_000,
  keepaliveDelayMs: 10_000,
  /** A connection attempt that has not completed by then is given up (and retried). */
  connectTimeoutMs: 10_000,
  /**
   * Every statement of the connection (its LISTENs, the pings) is given up past this: a server, proxy or NAT that
   * never answers a LISTEN after a reconnect would otherwise leave the node on its polling fallback for good.
   */
  statementTimeoutMs: 5_000,
  /**
   * How often a process whose claims wait for work reads how many processes' claims do (db/queries/listener-roster.ts):
   * a process that joins or leaves changes every one's part of a READY hint within this long.
   */
  rosterIntervalMs: 5_000,
} as const;

/** Lease and timing defaults for the task lifecycle, in seconds. */
export const LEASE_DEFAULTS = {
  /**
   * An agent whose heartbeats stopped this long ago is marked offline by the reaper; a runtime agent starting
   * takes over an id whose holder is that quiet (or gone, or draining), and otherwise the next free slot.
   */
  agentStaleSec: 90,
  /** How long a claimed task may wait for `start` before the reaper takes it back. */
  claimTtlSec: 60,
  /** How long a running task stays leased after its last heartbeat, when the task sets no heartbeat_sec. */
  heartbeatLeaseSec: 60,
  /** How often the agent runtime heartbeats a running task that sets no heartbeat_sec. */
  heartbeatSec: 20,
  /**
   * When an agent's first heartbeat of a task goes out, its "received" (at most its heartbeat interval): until the
   * agent shows a sign of life, a lapsed lease is taken for a lost claim reply and costs no attempt (the reaper).
   */
  receivedBeatSec: 2,
  /** A heartbeat lease lasts this many beats, so one late or lost beat never loses the task. */
  beatsPerLease: 3,
  /**
   * A lease that lapses before its agent showed any sign of life after the claim (no start, no
   * heartbeat: the claim's reply was most likely lost) hands the task back without spending an
   * attempt, this many times per task; after that, lapses count as attempts again.
   */
  claimLapsesMax: 3,
} as const;

/**
 * A provider's rate limit (an attempt that fails with class rate_limit, an HTTP 429): the task goes back
 * to READY after the provider's Retry-After (else `baseDelaySec` · 2^n for its n-th in a row, up to
 * `maxDelaySec`) without spending an attempt, and its model is paused for every agent until then.
 * After `returnsMax` in a row, a rate limit counts as an attempt again (a limit that never lifts is a failure).
 */
/** How the agent runtime reports usage while an attempt runs (runtime/attempt-usage.ts). */
export const USAGE_DEFAULTS = {
  /**
   * Reports made within this many milliseconds go as one statement (per model): a handler reporting each streamed
   * token costs a few statements a second, not one per token; durable this long after it was reported.
   */
  batchMs: 5,
  /** Past this share of a limit (a task's max_cost_usd, a DAG's or an agent's budget) a report's answer says `low`. */
  lowAt: 0.8,
  /**
   * A report its attempt's agent sends after the attempt ended (its lease was taken back while a call was paid for)
   * is still charged, this long after the end: the money was spent. Later ones are refused and not in the ledger.
   */
  lateReportSec: 24 * 3600,
  /** Models shown by name in the spend by model (metrics labels, GET /api/costs, dagent costs): the rest are summed. */
  modelsShown: 50,
} as const;

/**
 * Streams (ctx.stream): a writer sends what was written within `batchMs`, or `batchBytes` of it, as one statement (a
 * token-by-token writer costs a few statements a second); one batch in flight per stream. A reader reads up to
 * `readRows` chunks per statement, woken by the stream's NOTIFY, and every `pollMs` without one (a notification is
 * only a hint). A read that answers at once (MCP's stream resource and `stream_read`) returns chunks up to
 * `readBytes` (256 KiB; past it by one chunk at most), and says where to read on from.
 */
export const STREAM_DEFAULTS = {
  batchMs: 50,
  batchBytes: 64 * 1024,
  readRows: 500,
  pollMs: 1000,
  /**
   * A chunk counts at least this many bytes against LIMITS.streamBytesPerAttempt: what a row costs beyond its data,
   * so a writer of one-byte chunks reaches the limit at 131,072 rows, not 8 million.
   */
  chunkMinBytes: 64,
  /**
   * An SSE reader whose socket holds LIMITS.streamBacklogBytes unsent waits for it to drain; one that has not drained
   * this long after is cut off at the next read (it resumes with Last-Event-ID): about 0.5 MB/s at the least.
   */
  readerStallMs: 2000,
  readBytes: 256 * 1024,
} as const;

/**
 * The spend report (`dagent costs`, GET /api/costs, the dashboard's Spend page): `days` UTC days of daily spend and
 * of stops at a limit unless asked otherwise, at most `daysMax` over HTTP; the `dags` DAGs that spent most, the
 * `running` attempts that spent most, the `stops` latest stops.
 */
export const COSTS_DEFAULTS = {
  days: 7,
  daysMax: 90,
  dags: 20,
  running: 50,
  stops: 20,
} as const;

/**
 * Two runs side by side (`dagent dag compare`, GET /api/dags/:id/compare/:other, the dashboard's compare page): the API
 * cuts each output's text to `outputChars` unless asked otherwise (at most `outputCharsMax`); the CLI's table shows
 * `cellChars` of it, on one line (`--json` prints it whole).
 */
export const COMPARE_DEFAULTS = {
  outputChars: 2000,
  outputCharsMax: 1_000_000,
  cellChars: 40,
} as const;

export const RATE_LIMIT_DEFAULTS = {
  baseDelaySec: 5,
  maxDelaySec: 600,
  returnsMax: 10,
} as const;

/**
 * Tenants and fair share (docs/priority.md, "Tenants and fair share"). A task counts as its estimated_tokens, else its
 * max_tokens, else `taskTokens`, in the tokens served to its tenant. The share loop folds what claims served into
 * each tenant's virtual time every `foldIntervalMs`: fair share follows the claims within about that long.
 */
export const TENANT_DEFAULTS = {
  taskTokens: 1000,
  foldIntervalMs: 250,
  /** At most this many tenants: the claim reads those that have work for the agent. */
  maxTenants: 10_000,
  /** A tenant id: lowercase letters, digits, _ and - (no space: it is read back from a claim hint's group key). */
  idPattern: /^[a-z0-9][a-z0-9_-]{0,62}$/,
} as const;

/** A tenant's id, as every input names one (CLI, HTTP, agent definitions). */
export const tenantIdSchema = z.string().regex(TENANT_DEFAULTS.idPattern, {
  error: 'must be a tenant id: a lowercase letter or digit, then lowercase letters, digits, _ or - (at most 63)',
});

/**
 * Rate limits declared ahead of time (`dagent limits`, PUT /api/rate-limits/KEY): requests and tokens per
 * window, per model or provider. `windowSec` when a limit names none (per minute, as providers publish them),
 * between `windowMinSec` and `windowMaxSec`; `defaultTokens` is what a task without estimated_tokens reserves;
 * the rate-usage loop prunes usage rows every `pruneIntervalMs`.
 */
export const DECLARED_RATE_LIMIT_DEFAULTS = {
  windowSec: 60,
  windowMinSec: 1,
  windowMaxSec: 3600,
  defaultTokens: 0,
  pruneIntervalMs: 10_000,
  /** At most this many limits declared: the claim reads them all. */
  maxLimits: 1000,
} as const;
