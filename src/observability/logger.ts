import { createRequire } from 'node:module';
import { pino, type Logger } from 'pino';
import type prettyFactory from 'pino-pretty';
import { CONFIG_DEFAULTS } from '../config/index.js';

// Only a terminal gets pretty lines: pino-pretty (CommonJS, so a synchronous require does) loads then.
const pretty = (): typeof prettyFactory => {
  const mod = createRequire(import.meta.url)('pino-pretty') as typeof prettyFactory & { default?: typeof prettyFactory };
  return mod.default ?? mod;
};

/**
 * One root logger per process. Human-readable on a terminal, JSON lines otherwise;
 * always on stderr so stdout stays for command output. Bind ids with `logger.child({ dagId, taskId, agentId })`.
 */
export function loggerCreate(level: string = process.env.DAGENT_LOG_LEVEL ?? CONFIG_DEFAULTS.logLevel): Logger {
  const usePretty = process.stderr.isTTY && process.env.DAGENT_LOG_FORMAT !== 'json';
  // Synchronous, pino's own default: a line is written when the call returns, and nothing is left to flush at
  // exit. The asynchronous destination flushes at exit in a loop that retries a failed write every 100 ms, EPIPE
  // included, for ever: a node whose stderr reader stalled and then died never exited (test/cli/log-pipe.test.ts).
  // The price: while a reader stalls with the pipe full, the process waits for it, as with any blocking stderr.
  const stream = usePretty ? pretty()({ destination: 2, sync: true, ignore: 'pid,hostname' }) : pino.destination({ dest: 2, sync: true });
  return pino({ level, base: undefined }, stream);
}

let root: Logger | undefined;
export function logger(): Logger {
  root ??= loggerCreate();
  return root;
}
