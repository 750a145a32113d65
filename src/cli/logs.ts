import type { Command } from 'commander';
import type { LogLine } from '../db/queries/attempt-logs.js';
import type { AttemptLogView } from '../engine/read/attempt-logs.js';
import { InvalidInputError } from '../errors.js';
import { LIMITS } from '../config/index.js';
import { withDatabase, type CommandContext } from './context.js';
import { Output } from './output.js';

/** How often --follow asks for new lines. */
const FOLLOW_INTERVAL_MS = 500;

/** `12:04:05.123 WARN  message {"file":"a.ts"}` */
export function logLineText(l: Pick<LogLine, 'at' | 'level' | 'message' | 'fields'>): string {
  const at = new Date(l.at).toISOString().slice(11, 23);
  const fields = l.fields && Object.keys(l.fields).length ? ` ${JSON.stringify(l.fields)}` : '';
  return `${at} ${l.level.toUpperCase().padEnd(5)} ${l.message}${fields}`;
}

/** The note under an attempt's lines when its allowance dropped some. */
export function logDroppedText(a: { dropped: number }): string | undefined {
  if (!a.dropped) return undefined;
  return `(${a.dropped} more line(s) dropped: an attempt keeps ${LIMITS.logLinesPerAttempt} lines and ${LIMITS.logBytesPerAttempt} bytes of log)`;
}

/** `dagent logs <task-id> [--attempt N] [--follow]`: what an agent logged during an attempt. */
export function logsCommand(program: Command, ctx: CommandContext): void {
  program
    .command('logs')
    .description('what an agent logged while it ran a task: one attempt (the latest by default), or follow it live')
    .argument('<task-id>')
    .option('--attempt <n>', 'the attempt number (dagent task show lists them)')
    .option('-f, --follow', 'keep printing new lines until the attempt ends')
    .option('--json', 'machine-readable output (with --follow: one JSON line per log line)')
    .action(async (taskId: string, opts: { attempt?: string; follow?: boolean; json?: boolean }) => {
      const attempt = opts.attempt === undefined ? undefined : Number(opts.attempt);
      if (attempt !== undefined && (!Number.isInteger(attempt) || attempt < 1)) throw new InvalidInputError(`--attempt must be a whole number from 1, got ${opts.attempt}`);
      const { attemptLogsGet, LOG_READ_PAGE_LINES } = await import('../engine/read/attempt-logs.js');
      const { taskGet } = await import('../db/queries/tasks-read.js');
      const out = new Output(ctx.io, !!opts.json);
      await withDatabase(ctx, async (d) => {
        let view = await attemptLogsGet(d.db, taskId, { attempt });
        if (!opts.follow) {
          // Every line the attempt kept, a page at a time (an operator may raise the lines an attempt keeps).
          const a = view.attempt;
          for (let page = a?.entries.length ?? 0; a && page === LOG_READ_PAGE_LINES;) {
            const more = (await attemptLogsGet(d.db, taskId, { fence: a.fence, after: a.next })).attempt;
            if (!more) break;
            a.entries.push(...more.entries);
            a.next = more.next;
            page = more.entries.length;
          }
          out.result(view, () => printView(out, view, taskId));
          return;
        }
        // Follow: print what there is, then each new line, until the attempt being followed ends.
        let fence = view.attempt?.fence;
        let after = 0;
        for (;;) {
          const a = view.attempt;
          if (a && (fence === undefined || a.fence === fence)) {
            fence = a.fence;
            for (const l of a.entries) {
              if (opts.json) out.jsonLine(l);
              else out.line(logLineText(l));
            }
            after = a.next;
            if (!a.running && a.entries.length === 0) {
              if (!opts.json) for (const s of [logDroppedText(a), `(attempt ${a.attempt} ended)`]) if (s) out.line(s);
              return;
            }
          } else if (!a) {
            // Nothing logged yet: wait while the task may still run an attempt.
            const task = await taskGet(d.db, taskId);
            if (!task || ['completed', 'cancelled', 'dead_lettered'].includes(task.status)) {
              if (!opts.json) out.line(`(task ${taskId} is ${task?.status ?? 'gone'}; it logged nothing)`);
              return;
            }
          }
          await new Promise((r) => setTimeout(r, FOLLOW_INTERVAL_MS));
          view = await attemptLogsGet(d.db, taskId, { attempt, after: fence === undefined ? 0 : after });
          if (fence !== undefined && view.attempt && view.attempt.fence !== fence) {
            // A later attempt began: the one followed has ended.
            if (!opts.json) out.line(`(attempt ended; attempt ${view.attempt.attempt} began: dagent logs ${taskId} --follow)`);
            return;
          }
        }
      });
    });
}

function printView(out: Output, view: AttemptLogView, taskId: string): void {
  const a = view.attempt;
  if (!a) {
    out.line(`task ${taskId} has logged nothing`);
    return;
  }
  const others = view.attempts.filter((x) => x.fence !== a.fence).map((x) => x.attempt);
  out.line(`attempt ${a.attempt}${a.running ? ' (running)' : ''}: ${a.lines} line(s)${others.length ? `; other attempts with logs: ${others.join(', ')} (--attempt N)` : ''}`);
  for (const l of a.entries) out.line(logLineText(l));
  const dropped = logDroppedText(a);
  if (dropped) out.line(dropped);
}
