import type { Command } from 'commander';
import { withDatabase, type CommandContext } from './context.js';
import { Output } from './output.js';

/** `dagent migrate`: apply pending migrations, which every command also does when it opens the database. */
export function migrateCommand(program: Command, ctx: CommandContext): void {
  program
    .command('migrate')
    .description('apply pending database migrations (every command also does this on start)')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      await withDatabase(ctx, async () => {});
      const out = new Output(ctx.io, !!opts.json);
      out.result({ migrated: true }, () => out.line('migrations applied'));
    });
}
