import type { Command } from 'commander';
import { InvalidInputError } from '../errors.js';
import { dagCancel, taskCancel } from '../engine/dag/cancel.js';
import { withDatabase, type CommandContext } from './context.js';
import { Output } from './output.js';

export function cancelCommands(program: Command, ctx: CommandContext): void {
  program
    .command('cancel')
    .description('cancel a DAG, or a task and everything downstream of it')
    .argument('<dag-or-task-id>', 'dag_… or tsk_…')
    .option('--note <text>', 'why (recorded)')
    .option('--json', 'machine-readable output')
    .action(async (id: string, opts: { note?: string; json?: boolean }) => {
      if (!id.startsWith('dag_') && !id.startsWith('tsk_')) throw new InvalidInputError(`${id}: expected a DAG id (dag_…) or a task id (tsk_…)`);
      const cancelled = await withDatabase(ctx, (d) => (id.startsWith('dag_') ? dagCancel(d.db, id, 'cli', opts.note) : taskCancel(d.db, id, 'cli', opts.note)));
      const out = new Output(ctx.io, !!opts.json);
      // By key: the statement returns the rows in no set order, and a listing should not change from one run to the next.
      const keys = cancelled.map((c) => c.key).sort();
      out.result({ id, cancelled }, () => out.line(`${id}: cancelled ${cancelled.length} task(s)${keys.length ? `: ${keys.join(', ')}` : ''}`));
    });
}
