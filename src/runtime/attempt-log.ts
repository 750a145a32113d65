import { format } from 'node:util';
import type { Logger } from 'pino';
import { errorMessage } from '../db/pg-errors.js';
import type { Db } from '../db/handle.js';
import { attemptLogAppend, LOG_LEVELS, type LogLineInput } from '../engine/read/attempt-logs.js';
import type { TaskRef } from '../engine/attempt/refusal.js';
import { DagentError } from '../errors.js';

/** A batch goes out when it holds this many lines, or this long after its first line. */
const FLUSH_LINES = 100;
const FLUSH_MS = 1_000;
/** Lines kept while the database cannot take them: past this the oldest go (the attempt keeps at most its allowance anyway). */
const BUFFER_MAX = 2_000;
/** info: the lowest level stored whatever the process's own level. */
const STORED_FROM = LOG_LEVELS.indexOf('info');

/**
 * The handler's `ctx.log`: the task's pino logger (its lines still go where the process logs), whose lines are also
 * stored with the attempt (engine/read/attempt-logs.ts) in batches, and before the attempt ends. A handler that never
 * logs costs nothing: the logger is made on first use, and an empty batch is never sent.
 */
export class AttemptLog {
  private buffer: LogLineInput[] = [];
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> = Promise.resolve();
  private closed = false;
  private wrapped: Logger | undefined;

  constructor(private readonly db: Db, private readonly ref: TaskRef, private readonly log: Logger) {}

  /** The logger handed to the handler. */
  get logger(): Logger {
    this.wrapped ??= this.wrap(this.log, {});
    return this.wrapped;
  }

  /** Send what is buffered, and wait for it (before the attempt ends: afterwards the lines would be refused). */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.buffer;
    this.buffer = [];
    if (batch.length) this.sending = this.sending.then(() => this.send(batch));
    return this.sending;
  }

  /** The attempt is over (its lease lost, or settled): later lines go to the process log only. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.buffer = [];
  }

  private async send(batch: LogLineInput[]): Promise<void> {
    try {
      const r = await attemptLogAppend(this.db, this.ref, batch);
      if (r.dropped) this.log.debug({ dropped: r.dropped }, 'log lines past the attempt\'s allowance were dropped');
    } catch (err) {
      // No longer the holder: the lines have no attempt to join. A database blip: keep them for the next batch.
      if (err instanceof DagentError) this.close();
      else if (!this.closed) this.buffer = [...batch, ...this.buffer].slice(-BUFFER_MAX);
      this.log.debug({ err: errorMessage(err) }, 'log lines not stored with the attempt');
    }
  }

  private record(level: string, bindings: Record<string, unknown>, args: unknown[]): void {
    if (this.closed) return;
    const line = lineOf(level, bindings, args);
    this.buffer.push(line);
    if (this.buffer.length > BUFFER_MAX) this.buffer.shift();
    if (this.buffer.length >= FLUSH_LINES) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS).unref();
  }

  /** The pino logger, its level methods also recording, and its children too (with their bindings as fields). */
  private wrap(target: Logger, bindings: Record<string, unknown>): Logger {
    return new Proxy(target, {
      get: (t, prop, receiver) => {
        if (typeof prop === 'string' && (LOG_LEVELS as readonly string[]).includes(prop)) {
          return (...args: unknown[]) => {
            // info and above are kept whatever the process prints (its level may be warn to keep stderr quiet); debug
            // and trace when the process logs them too.
            if (LOG_LEVELS.indexOf(prop as never) >= STORED_FROM || t.isLevelEnabled(prop)) this.record(prop, bindings, args);
            // Called on the logger itself: pino's level methods read their logger through `this`.
            return Reflect.apply(t[prop as keyof Logger] as (...a: unknown[]) => void, t, args);
          };
        }
        if (prop === 'child') {
          return (b: Record<string, unknown>, o?: object) => this.wrap(t.child(b, o as never), { ...bindings, ...b });
        }
        return Reflect.get(t, prop, receiver) as unknown;
      },
    });
  }
}

/** A pino call's arguments as a stored line: `(obj, msg, ...args)` or `(msg, ...args)`; an Error is kept as err. */
function lineOf(level: string, bindings: Record<string, unknown>, args: unknown[]): LogLineInput {
  const [first, ...rest] = args;
  let fields: Record<string, unknown> = { ...bindings };
  let message: string;
  if (first instanceof Error) {
    fields.err = { type: first.name, message: first.message, stack: first.stack };
    message = rest.length ? format(...rest) : first.message;
  } else if (first !== null && typeof first === 'object') {
    const { msg, ...others } = first as Record<string, unknown>;
    fields = { ...fields, ...others };
    if (others.err instanceof Error) fields.err = { type: others.err.name, message: others.err.message, stack: others.err.stack };
    message = rest.length ? format(...rest) : typeof msg === 'string' ? msg : '';
  } else message = format(...args);
  return { level, message, fields, at: Date.now() };
}
