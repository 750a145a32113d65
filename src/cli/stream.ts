import type { Command } from 'commander';
import { InvalidInputError } from '../errors.js';
import { STREAM_DEFAULTS } from '../config/index.js';
import { withDatabase, type CommandContext } from './context.js';
import { Output } from './output.js';

/** How often the command reads the stream again while it follows one (it reads a page at a time until caught up). */
const FOLLOW_INTERVAL_MS = 200;

/**
 * `dagent stream <task-id> [name] [--from N] [--attempt N] [--json]`: a task's stream (what its agent wrote with
 * ctx.stream), printed as it is written, from the start or after chunk N, until it ends. Text is printed as text
 * (line breaks kept, every other control character shown as an escape: no agent's text reaches the terminal as a
 * command); JSON chunks one per line. With --json, one JSON line per chunk and one for the end.
 */
export function streamCommand(program: Command, ctx: CommandContext): void {
  program
    .command('stream')
    .description('print a task\'s stream (ctx.stream) as it is written, until it ends')
    .argument('<task-id>')
    .argument('[name]', 'the stream\'s name', 'output')
    .option('--from <n>', 'print the chunks after this one (0: all)', '0')
    .option('--attempt <n>', 'that attempt\'s stream (default the latest attempt\'s)')
    .option('--json', 'one JSON line per chunk ({seq, text} or {seq, json}), then {end}')
    .action(async (taskId: string, name: string, opts: { from: string; attempt?: string; json?: boolean }) => {
      const whole = (flag: string, v: string, min: number) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < min) throw new InvalidInputError(`${flag} must be a whole number from ${min}, got ${v}`);
        return n;
      };
      let after = whole('--from', opts.from, 0);
      const attempt = opts.attempt === undefined ? undefined : whole('--attempt', opts.attempt, 1);
      const { streamOpen, streamRead, streamEndAfter } = await import('../engine/read/streams.js');
      const out = new Output(ctx.io, !!opts.json);
      await withDatabase(ctx, async (d) => {
        const s = await streamOpen(d.db, taskId, name, attempt);
        const key = { taskId, fence: s.fence, name };
        let lastWasText = false;
        for (;;) {
          const chunks = await streamRead(d.db, key, after, STREAM_DEFAULTS.readRows);
          for (const c of chunks) {
            if (opts.json) out.jsonLine(c.kind === 'text' ? { seq: c.seq, text: c.data } : { seq: c.seq, json: JSON.parse(c.data) as unknown });
            else if (c.kind === 'text') out.text(c.data);
            else {
              // A JSON chunk on a line of its own, after text that did not end one.
              if (lastWasText) out.text('\n');
              out.line(c.data);
            }
            lastWasText = c.kind === 'text' && !c.data.endsWith('\n');
            after = c.seq;
          }
          if (chunks.length === STREAM_DEFAULTS.readRows) continue;
          const end = await streamEndAfter(d.db, key, after);
          if (end) {
            if (opts.json) out.jsonLine({ end });
            else {
              if (lastWasText) out.text('\n');
              out.line(`(stream ${name} of attempt ${s.attempt} ${end.reason === 'attempt_ended' ? `ended with its attempt: ${end.outcome}` : end.reason})`);
            }
            return;
          }
          await new Promise((r) => setTimeout(r, FOLLOW_INTERVAL_MS));
        }
      });
    });
}
