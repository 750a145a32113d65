import { schedulingCommands } from './scheduling.js';
import { Command, CommanderError } from 'commander';
import { DagValidationError, DagentError } from '../errors.js';
import { agentCommands } from './agent.js';
import { cancelCommands } from './cancel.js';
import { cronCommands } from './cron.js';
import { commandContext, withDatabase, type CommandContext } from './context.js';
import { CONFIG_DEFAULTS } from '../config/index.js';
import { demoCommand } from './demo.js';
import { dlqCommands } from './dlq.js';
import { exitCodeFor } from './exit-codes.js';
import { inspectCommands } from './inspect.js';
import { Output, processIo, type Io } from './output.js';
import { submitCommands } from './submit.js';
import { upCommand } from './up.js';
import { httpAdminCommands } from './http-admin.js';
import { watchCommand } from './watch.js';
import { dbCommands } from './db.js';

export function programBuild(ctx: CommandContext): Command {
  const program = new Command('dagent')
    .description('DAG-aware work orchestrator for fleets of AI agents, on PostgreSQL')
    .version('0.1.0')
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({ writeOut: ctx.io.stdout, writeErr: ctx.io.stderr });
  submitCommands(program, ctx);
  inspectCommands(program, ctx);
  cancelCommands(program, ctx);
  dlqCommands(program, ctx);
  schedulingCommands(program, ctx);
  cronCommands(program, ctx);
  watchCommand(program, ctx);
  agentCommands(program, ctx);
  demoCommand(program, ctx);
  upCommand(program, ctx);
  httpAdminCommands(program, ctx);
  dbCommands(program, ctx);
  program
    .command('migrate')
    .description('apply pending database migrations (every command also does this on start)')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      await withDatabase(ctx, async () => {});
      const out = new Output(ctx.io, !!opts.json);
      out.result({ migrated: true }, () => out.line('migrations applied'));
    });
  // Every command, nested ones (`agent run`, `dag budget`, `db stop`) included: errors become exit codes, never process.exit.
  const override = (c: Command) => {
    c.exitOverride().configureOutput({ writeOut: ctx.io.stdout, writeErr: ctx.io.stderr });
    c.commands.forEach(override);
  };
  program.commands.forEach(override);
  return program;
}

/** Run the CLI; returns the exit code instead of exiting, so tests can run it in-process. */
export async function main(argv: string[], io: Io = processIo): Promise<number> {
  const json = argv.includes('--json');
  try {
    // Long-running processes log at info (an agent's ctx.log.info shows); one-shot commands warnings only.
    const longRunning = argv[0] === 'up' || (argv[0] === 'agent' && argv[1] === 'run');
    await programBuild(commandContext(io, longRunning ? CONFIG_DEFAULTS.logLevel : CONFIG_DEFAULTS.commandLogLevel)).parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    const code = exitCodeFor(err);
    if (err instanceof CommanderError) return code;
    if (json) {
      const e = err instanceof DagentError ? { code: err.code, message: err.message, ...err.details } : { code: 'INTERNAL', message: String(err) };
      io.stdout(`${JSON.stringify({ error: e }, null, 2)}\n`);
    }
    if (err instanceof DagValidationError) io.stderr(`${err.message}\n${err.problems.length} problem(s); nothing was written\n`);
    else if (err instanceof DagentError) io.stderr(`error: ${err.message}\n`);
    else io.stderr(`error: ${(err as Error)?.stack ?? String(err)}\n`);
    return code;
  }
}
