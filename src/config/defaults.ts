// Without zod, so the CLI can read them before it loads anything else (its start-up time).
import os from 'node:os';
import path from 'node:path';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** How hot-path statements are prepared (DAGENT_DB_PREPARED); see db/pool-mode.ts. */
export const PREPARED_STATEMENTS = ['named', 'unnamed'] as const;
export type PreparedStatements = (typeof PREPARED_STATEMENTS)[number];

/** What a process uses when the environment says nothing. Each default is defined here once. */
export const CONFIG_DEFAULTS = {
  /** The PostgreSQL schema dagent's tables live in (DAGENT_DB_SCHEMA), so it can share a database with an application. */
  dbSchema: 'dagent',
  /**
   * Seconds to wait for a new database connection: a server that accepts TCP but never answers
   * (a half-open path, a hung host) is "unavailable" after this, not a request that never returns.
   */
  dbConnectTimeoutSec: 10,
  /**
   * Seconds a statement may wait for the server's answer before the client gives it up and drops the
   * connection (not the server's statement_timeout: this catches a connection whose server went silent).
   * Migrations run without it.
   */
  dbQueryTimeoutSec: 60,
  /**
   * Connections in a process's pool (DAGENT_DB_POOL): the most it holds at PostgreSQL besides its one LISTEN
   * connection, however many HTTP agents, long polls and event-stream subscribers it serves.
   */
  dbPool: 10,
  /** Where the embedded server keeps its data (DAGENT_DATA_DIR), relative to the working directory. */
  dataDir: '.dagent',
  /** Log level (DAGENT_LOG_LEVEL) of long-running processes and of loggers an embedding program does not pass in. */
  logLevel: 'info',
  /** Log level of one-shot CLI commands: warnings only, so their output stays readable. */
  commandLogLevel: 'warn',
  /** The HTTP API's port for `dagent up` (DAGENT_HTTP_PORT). */
  httpPort: 7070,
  /** The HTTP API's bind address (DAGENT_HTTP_HOST): this machine only. */
  httpHost: '127.0.0.1',
  /** Where paths in a DAG may reach besides the DAG file's directory (DAGENT_FILE_ROOTS): the working directory. */
  fileRoots: ['.'],
  /**
   * Where the agent runtime makes the git worktrees of tasks that declare a `workspace` (DAGENT_WORKSPACE_ROOT):
   * outside every project, so a worktree never shows inside the repository it was made from.
   */
  workspaceRoot: path.join(os.tmpdir(), 'dagent-workspaces'),
} as const satisfies { logLevel: LogLevel; commandLogLevel: LogLevel } & Record<string, unknown>;
