import type { Command } from 'commander';
import { resolver, withDatabase, type CommandContext } from './context.js';
import { jsonOptionRead } from './json-option.js';
import { Output } from './output.js';

/** `dagent signal <key>`: send a signal; every task waiting on the key completes with the payload as its output. */
export function signalCommand(program: Command, ctx: CommandContext): void {
  program
    .command('signal')
    .description('send a signal: tasks waiting on the key (wait_for) complete with the payload as their output')
    .argument('<key>', 'the signal\'s key, as a task\'s wait_for.signal names it (deploy:prod)')
    .option('--payload <json>', 'the payload, as JSON (default null)')
    .option('--payload-file <file>', 'read the payload from a JSON file (- for standard input)')
    .option('--tenant <id>', 'the tenant whose waiting tasks it reaches: keys are per tenant (default the default tenant)')
    .option('--json', 'machine-readable output')
    .action(async (key: string, opts: { payload?: string; payloadFile?: string; tenant?: string; json?: boolean }) => {
      const payload = jsonOptionRead('payload', opts.payload, opts.payloadFile).value ?? null;
      const { signalSend } = await import('../engine/waits/signals.js');
      const r = await withDatabase(ctx, (d) => signalSend(d.db, key, payload, { by: resolver(ctx), log: ctx.log, tenant: opts.tenant }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(r, () => out.line(r.completed.length
        ? `${key}: completed ${r.completed.length} waiting task(s): ${r.completed.map((t) => `${t.key} (${t.id})`).join(', ')}`
        : `${key}: recorded; no task waits on it now (one created before this that begins waiting later completes with it)`));
    });
}
