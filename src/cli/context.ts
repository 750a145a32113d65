import type { Logger } from 'pino';
import { CONFIG_DEFAULTS, LOG_LEVELS, configFromEnv } from '../config/index.js';
import { databaseOpen, type Database } from '../db/connection.js';
import { loggerCreate } from '../observability/logger.js';
import type { Io } from './output.js';
import { InvalidInputError } from '../errors.js';

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

/** Open the database (DATABASE_URL, else the embedded server in DAGENT_DATA_DIR or .dagent), run, close. */
export async function withDatabase<T>(ctx: CommandContext, fn: (d: Database) => Promise<T>): Promise<T> {
  const cfg = configFromEnv(ctx.io.env);
  const d = await databaseOpen({ url: cfg.databaseUrl, dataDir: cfg.dataDir, log: ctx.log });
  try {
    return await fn(d);
  } finally {
    await d.close();
  }
}
