import type { Command } from 'commander';
import { configFromEnv } from '../config/index.js';
import { embeddedStatus, embeddedStop } from '../db/embedded-watch.js';
import { InvalidInputError } from '../errors.js';
import type { CommandContext } from './context.js';
import { Output } from './output.js';

/** `dagent db status|stop`: the embedded PostgreSQL server of the data folder (DAGENT_DATA_DIR, default .dagent). */
export function dbCommands(program: Command, ctx: CommandContext): void {
  const db = program.command('db').description('the embedded PostgreSQL server (when DATABASE_URL is not set)');
  const dataDir = () => {
    const cfg = configFromEnv(ctx.io.env);
    if (cfg.databaseUrl) throw new InvalidInputError('DATABASE_URL is set: dagent uses that server, not an embedded one (unset it to manage the embedded server)');
    return cfg.dataDir;
  };
  db.command('status')
    .description('whether the data folder\'s server runs, with its pid and port')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      const s = await embeddedStatus(dataDir());
      const out = new Output(ctx.io, !!opts.json);
      out.result(s, () => out.line(s.running
        ? `embedded PostgreSQL in ${s.dataDir}: running, pid ${s.pid}, port ${s.port}`
        : `embedded PostgreSQL in ${s.dataDir}: stopped${s.stoppedByOperator ? ' (by dagent db stop: running dagent processes leave it stopped)' : ''}`));
    });
  db.command('stop')
    .description('stop the data folder\'s server; running dagent processes leave it stopped until one is started anew')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      const before = await embeddedStop(dataDir());
      const out = new Output(ctx.io, !!opts.json);
      out.result({ ...before, stopped: true, wasRunning: before.running }, () => out.line(before.running
        ? `embedded PostgreSQL in ${before.dataDir} (pid ${before.pid}, port ${before.port}): stopped`
        : `embedded PostgreSQL in ${before.dataDir}: was not running; marked stopped`));
    });
}
