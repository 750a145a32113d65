import { z } from 'zod';
import { InvalidInputError } from '../errors.js';

/** Process configuration, read from the environment. Every option documents its default. */
export const configSchema = z.object({
  /** Postgres URL. Default: unset, which starts (or joins) the embedded server in `dataDir`. */
  databaseUrl: z.string().url().optional(),
  /** Where the embedded server keeps its data. Default `.dagent` in the working directory. */
  dataDir: z.string().min(1).default('.dagent'),
  /** pino level. Default `info`. */
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Agent modules `dagent up` runs, from DAGENT_AGENTS (comma-separated; `file:concurrency` allowed). Default none. */
  agents: z.array(z.string().regex(/^[^:]+(:\d+)?$/, { error: 'expected file or file:concurrency' })).default([]),
  /** Backpressure: submissions are refused while READY + PENDING tasks number this many or more. Default: no limit. */
  maxQueued: z.coerce.number().int().min(1).optional(),
  /** The HTTP API's port for `dagent up`. Default 7070. */
  httpPort: z.coerce.number().int().min(0).max(65535).default(7070),
  /** The HTTP API's bind address. Default 127.0.0.1 (this machine only). */
  httpHost: z.string().min(1).default('127.0.0.1'),
});
export type Config = z.infer<typeof configSchema>;

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = configSchema.safeParse({
    databaseUrl: env.DATABASE_URL || undefined,
    dataDir: env.DAGENT_DATA_DIR || undefined,
    logLevel: env.DAGENT_LOG_LEVEL || undefined,
    agents: env.DAGENT_AGENTS ? env.DAGENT_AGENTS.split(',').map((a) => a.trim()).filter(Boolean) : undefined,
    maxQueued: env.DAGENT_MAX_QUEUED || undefined,
    httpPort: env.DAGENT_HTTP_PORT || undefined,
    httpHost: env.DAGENT_HTTP_HOST || undefined,
  });
  if (!parsed.success) {
    const names: Record<string, string> = { databaseUrl: 'DATABASE_URL', dataDir: 'DAGENT_DATA_DIR', logLevel: 'DAGENT_LOG_LEVEL', agents: 'DAGENT_AGENTS', maxQueued: 'DAGENT_MAX_QUEUED', httpPort: 'DAGENT_HTTP_PORT', httpHost: 'DAGENT_HTTP_HOST' };
    const issue = parsed.error.issues[0]!;
    throw new InvalidInputError(`environment ${names[String(issue.path[0])] ?? issue.path.join('.')}: ${issue.message}`);
  }
  return parsed.data;
}

/** Lease and timing defaults for the task lifecycle, in seconds. */
export const LEASE_DEFAULTS = {
  /** How long a claimed task may wait for `start` before the reaper takes it back. */
  claimTtlSec: 60,
  /** How long a running task stays leased after its last heartbeat, when the task sets no heartbeat_sec. */
  heartbeatLeaseSec: 60,
  /** How often the agent runtime heartbeats a running task that sets no heartbeat_sec. */
  heartbeatSec: 20,
  /** A heartbeat lease lasts this many beats, so one late or lost beat never loses the task. */
  beatsPerLease: 3,
} as const;
