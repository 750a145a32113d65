import { tracingWanted } from '../observability/tracing-env.js';
import type { Logger } from 'pino';
import { CONFIG_DEFAULTS, LOG_LEVELS } from '../config/defaults.js';
import type { Database } from '../db/handle.js';
import type { DirectUrlError } from '../db/migrate.js';
import type { Io } from './output.js';
import { InvalidInputError, UnavailableError } from '../errors.js';

// The heavy modules (the database, the logger, the configuration's schema) load when a command
// runs, not when the CLI starts: `dagent --help` loads none of them (docs/benchmarks.md).

export interface CommandContext {
  io: Io;
  /** Available once the command runs (after `ready`). */
  readonly log: Logger;
}

/** A command's context; `ready()` creates its logger, before the action runs. */
export interface CommandContextLazy extends CommandContext {
  ready(): Promise<void>;
}

/** One-shot commands log warnings only unless DAGENT_LOG_LEVEL says otherwise. */
export function commandContext(io: Io, defaultLevel: string = CONFIG_DEFAULTS.commandLogLevel): CommandContextLazy {
  const level = io.env.DAGENT_LOG_LEVEL ?? defaultLevel;
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new InvalidInputError(`DAGENT_LOG_LEVEL=${level}: expected one of ${LOG_LEVELS.join(', ')}`);
  let log: Logger | undefined;
  return {
    io,
    get log(): Logger {
      if (!log) throw new Error('the command logger is created when a command runs (ready)');
      return log;
    },
    async ready() {
      log ??= (await import('../observability/logger.js')).loggerCreate(level);
    },
  };
}

/** What a failed open becomes: one line that says what could not be reached and what to do. */
async function databaseOpenError(e: unknown, pooledUrl: string | undefined, dataDir: string): Promise<Error> {
  const { errorMessage, isConnectionLost } = await import('../db/pg-errors.js');
  // An error met connecting to DATABASE_DIRECT_URL names that variable.
  const direct = (e as DirectUrlError | undefined)?.directUrl;
  const url = direct ?? pooledUrl;
  const variable = direct ? 'DATABASE_DIRECT_URL' : 'DATABASE_URL';
  const code = (e as NodeJS.ErrnoException)?.code ?? ((e as { cause?: NodeJS.ErrnoException })?.cause)?.code;
  if (url && isConnectionLost(e) && code !== '53300') {
    const where = (() => { try { const u = new URL(url); return `${u.hostname}:${u.port || 5432}`; } catch { return variable; } })();
    return new UnavailableError(2, direct
      ? `cannot reach PostgreSQL at ${where} (DATABASE_DIRECT_URL: ${errorMessage(e)}): is it running, and is that address the database's own, past the pooler?`
      : `cannot reach PostgreSQL at ${where} (${errorMessage(e)}): is it running? Unset DATABASE_URL to use the embedded server in ${dataDir}`);
  }
  // The server answered but refused: say what it said, where, and what to change. 3D000 no such
  // database, 28xxx credentials, 53300 too many connections, 42501 not allowed to create the schema.
  if (url && typeof code === 'string' && /^(3D000|28...|53300|42501)$/.test(code)) {
    const u = (() => { try { return new URL(url); } catch { return undefined; } })();
    const where = u ? `${u.hostname}:${u.port || 5432}${u.pathname}` : variable;
    const hint = code === '3D000' ? `create it (createdb ${u?.pathname.slice(1) ?? ''}) or point ${variable} at one that exists`
      : code.startsWith('28') ? `check the user and password in ${variable}`
      : code === '53300' ? 'the server has no free connections; retry, or lower other clients\' pools'
      : `grant the user CREATE on the database, or set DAGENT_DB_SCHEMA to a schema it owns`;
    const message = `PostgreSQL at ${where} refused: ${errorMessage(e)}; ${hint}`;
    return code === '53300' ? new UnavailableError(2, message) : new InvalidInputError(message);
  }
  if (!url && (code === 'EACCES' || code === 'EPERM' || code === 'EROFS')) {
    return new InvalidInputError(`cannot use the data folder ${dataDir} (${code}): make it writable, or set DAGENT_DATA_DIR to another folder (or DATABASE_URL to a server)`);
  }
  return e as Error;
}

/** Open the database (DATABASE_URL, else the embedded server in DAGENT_DATA_DIR or .dagent), run, close. */
export async function withDatabase<T>(ctx: CommandContext, fn: (d: Database) => Promise<T>): Promise<T> {
  const [{ configFromEnv }, { databaseOpen }] = await Promise.all([import('../config/index.js'), import('../db/open.js')]);
  const cfg = configFromEnv(ctx.io.env);
  const d = await databaseOpen({
    url: cfg.databaseUrl, directUrl: cfg.databaseDirectUrl, prepared: cfg.dbPrepared, dataDir: cfg.dataDir, schema: cfg.dbSchema, poolSize: cfg.dbPool, log: ctx.log,
  }).catch(async (e: unknown) => {
    throw await databaseOpenError(e, cfg.databaseUrl, cfg.dataDir);
  });
  // Traces only when the OTEL_* variables ask for them: the SDK is not even loaded otherwise.
  const tracing = tracingWanted(ctx.io.env) ? await (await import('../observability/tracing-setup.js')).tracingStart(d.db, ctx.io.env, ctx.log) : null;
  try {
    return await fn(d);
  } catch (e) {
    // The server lost, or full, after the open: the same one line as at the open, not a wrapped statement's stack.
    const { isConnectionLost, errorMessage } = await import('../db/pg-errors.js');
    if (!isConnectionLost(e)) throw e;
    const driverError = (e as { cause?: unknown }).cause ?? e;
    const mapped = await databaseOpenError(driverError, cfg.databaseUrl, cfg.dataDir);
    throw mapped !== driverError ? mapped : new UnavailableError(2, `the embedded PostgreSQL in ${cfg.dataDir} did not answer (${errorMessage(e)}); run the command again`);
  } finally {
    await tracing?.shutdown();
    await d.close();
  }
}

/** Who a human action is recorded as: `cli:$USER`. */
export function resolver(ctx: CommandContext): string {
  return `cli:${ctx.io.env.USER ?? ctx.io.env.LOGNAME ?? 'unknown'}`;
}
