import type { Command } from 'commander';
import { maintenanceServices } from '../maintenance/index.js';
import { withDatabase, type CommandContext } from './context.js';

/**
 * Long-running service mode: the maintenance loops (reaper, promoter) until
 * SIGINT or SIGTERM. Any number of `dagent up` processes may run; each duty
 * runs once per interval cluster-wide (cadence gate).
 */
export function upCommand(program: Command, ctx: CommandContext): void {
  program
    .command('up')
    .description('run the maintenance loops (reaper, promoter) until SIGINT/SIGTERM')
    .action(async () => {
      await withDatabase(ctx, async (d) => {
        const services = maintenanceServices(d.db, ctx.log);
        services.forEach((s) => s.start());
        ctx.io.stdout(`dagent up: ${services.map((s) => s.name).join(', ')} running; stop with Ctrl-C or SIGTERM\n`);
        const signal = await new Promise<string>((resolve) => {
          process.once('SIGINT', () => resolve('SIGINT'));
          process.once('SIGTERM', () => resolve('SIGTERM'));
        });
        ctx.log.info({ signal }, 'stopping');
        await Promise.all(services.map((s) => s.stop()));
        ctx.io.stdout('dagent up: stopped\n');
      });
    });
}
