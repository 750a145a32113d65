import { writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pino, type DestinationStream, type Logger } from 'pino';
import type PinoPretty from 'pino-pretty';
import { CONFIG_DEFAULTS } from '../config/index.js';
import { terminalSafe } from '../terminal-text.js';

// Only a terminal gets pretty lines: pino-pretty (CommonJS, so a synchronous require does) loads then.
const pretty = (): typeof PinoPretty => {
  const mod = createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty & { default?: typeof PinoPretty };
  return mod.default ?? mod;
};

/** A value whose every string (keys too) is made safe for a terminal (terminal-text.ts). */
function terminalSafeDeep(v: unknown): unknown {
  if (typeof v === 'string') return terminalSafe(v);
  if (Array.isArray(v)) return v.map(terminalSafeDeep);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [terminalSafe(k), terminalSafeDeep(x)]));
  return v;
}

/**
 * Pretty lines on stderr (fd 2), written synchronously. A log line may carry what an agent wrote (its failure's
 * message, a provider's rate-limit reason): each string is made safe for the terminal before pino-pretty lays the
 * line out, so a control sequence is shown, never acted on, and a newline cannot start a forged line.
 */
function prettyDestination(): DestinationStream {
  const prettify = pretty().prettyFactory({ ignore: 'pid,hostname' });
  return {
    write(line: string) {
      let out: string;
      try {
        out = prettify(terminalSafeDeep(JSON.parse(line)));
      } catch {
        out = `${terminalSafe(line.trimEnd())}\n`;
      }
      writeSync(2, out);
    },
  };
}

/**
 * One root logger per process. Human-readable on a terminal, JSON lines otherwise;
 * always on stderr so stdout stays for command output. Bind ids with `logger.child({ dagId, taskId, agentId })`.
 */
export function loggerCreate(level: string = process.env.DAGENT_LOG_LEVEL ?? CONFIG_DEFAULTS.logLevel): Logger {
  const format = process.env.DAGENT_LOG_FORMAT;
  const usePretty = format === 'pretty' || (process.stderr.isTTY && format !== 'json');
  // Synchronous, pino's own default: a line is written when the call returns, and nothing is left to flush at
  // exit. The asynchronous destination flushes at exit in a loop that retries a failed write every 100 ms, EPIPE
  // included, for ever: a node whose stderr reader stalled and then died never exited (test/cli/log-pipe.test.ts).
  // The price: while a reader stalls with the pipe full, the process waits for it, as with any blocking stderr.
  const stream = usePretty ? prettyDestination() : pino.destination({ dest: 2, sync: true });
  return pino({ level, base: undefined }, stream);
}

let root: Logger | undefined;
export function logger(): Logger {
  root ??= loggerCreate();
  return root;
}
