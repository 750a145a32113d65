import type { Command } from 'commander';
import { DagNotCompletedError } from '../errors.js';
import { withDatabase, type CommandContext } from './context.js';
import { positiveInt } from './inspect.js';
import { dagWatch } from './progress.js';

const WATCH_INTERVAL_MS = 250;

/** `dagent watch DAG_ID`: live progress until the DAG completes (exit 0), is cancelled or blocks (exit 1). */
export function watchCommand(program: Command, ctx: CommandContext): void {
  program
    .command('watch')
    .description('show a DAG\'s progress live, a line per task transition and a status line, until it completes, blocks or is cancelled')
    .argument('<dag-id>')
    .option('--interval-ms <ms>', `how often to look (default ${WATCH_INTERVAL_MS})`, positiveInt('--interval-ms'), WATCH_INTERVAL_MS)
    .action(async (dagId: string, opts: { intervalMs: number }) => {
      await withDatabase(ctx, async (d) => {
        const s = await dagWatch(d.db, dagId, ctx.io, opts.intervalMs);
        if (s.dag.status !== 'completed') {
          throw new DagNotCompletedError(dagId, s.dag.status, s.dag.blockedReason);
        }
        ctx.io.stdout(`DAG ${dagId} completed\n`);
      });
    });
}
