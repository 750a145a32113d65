import type { Logger } from 'pino';
import { CONFIG_DEFAULTS, LOG_LEVELS, configFromEnv } from '../config/index.js';
import { databaseOpen, errorMessage, isConnectionLost, type Database } from '../db/connection.js';
import { loggerCreate } from '../observability/logger.js';
import type { Io } from './output.js';
import { InvalidInputError, UnavailableError } from '../errors.js';

export interface CommandContext {
  io: Io;
  log: Logger;
}

/** One-shot commands log warnings only unless DAGENT_LOG_LEVEL says otherwise. */
export function commandContext(io: Io, defaultLevel: string = CONFIG_DEFAULTS.commandLogLevel): CommandContext {
  const level = io.env.DAGENT_LOG_LEVEL ?? defaultLevel;
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new InvalidInputError(`DAGENT_LOG_LEVEL=${level}: expected one of ${LOG_LEVELS.join(', ')}`);
  return { io, log: loggerCreate(level) };
}

/** What a failed open becomes: one line that says what could not be reached and what to do. */
export function databaseOpenError(e: unknown, url: string | undefined, dataDir: string): Error {
  const code = (e as NodeJS.ErrnoException)?.code;
  if (url && isConnectionLost(e)) {
    const where = (() => { try { const u = new URL(url); return `${u.hostname}:${u.port || 5432}`; } catch { return 'DATABASE_URL'; } })();
    return new UnavailableError(2, `cannot reach PostgreSQL at ${where} (${errorMessage(e)}): is it running? Unset DATABASE_URL to use the embedded server in ${dataDir}`);
  }
  if (!url && (code === 'EACCES' || code === 'EPERM' || code === 'EROFS')) {
    return new InvalidInputError(`cannot use the data folder ${dataDir} (${code}): make it writable, or set DAGENT_DATA_DIR to another folder (or DATABASE_URL to a server)`);
  }
  return e as Error;
}

/** Open the database (DATABASE_URL, else the embedded server in DAGENT_DATA_DIR or .dagent), run, close. */
export async function withDatabase<T>(ctx: CommandContext, fn: (d: Database) => Promise<T>): Promise<T> {
  const cfg = configFromEnv(ctx.io.env);
  const d = await databaseOpen({ url: cfg.databaseUrl, dataDir: cfg.dataDir, log: ctx.log }).catch((e: unknown) => {
    throw databaseOpenError(e, cfg.databaseUrl, cfg.dataDir);
  });
  try {
    return await fn(d);
  } finally {
    await d.close();
  }
}
