import { schedulingCommands } from './scheduling.js';
import { Command, CommanderError } from 'commander';
import { DagValidationError, DagentError } from '../errors.js';
import { databaseOpen } from '../db/connection.js';
import { configFromEnv } from '../config/index.js';
import { agentCommands } from './agent.js';
import { cancelCommands } from './cancel.js';
import { cronCommands } from './cron.js';
import { commandContext, type CommandContext } from './context.js';
import { demoCommand } from './demo.js';
import { dlqCommands } from './dlq.js';
import { exitCodeFor } from './exit-codes.js';
import { inspectCommands } from './inspect.js';
import { Output, processIo, type Io } from './output.js';
import { submitCommands } from './submit.js';
import { upCommand } from './up.js';
import { httpAdminCommands } from './http-admin.js';
import { watchCommand } from './watch.js';

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
  program
    .command('migrate')
    .description('apply pending database migrations (every command also does this on start)')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      const cfg = configFromEnv(ctx.io.env);
      const d = await databaseOpen({ url: cfg.databaseUrl, dataDir: cfg.dataDir, log: ctx.log });
      await d.close();
      const out = new Output(ctx.io, !!opts.json);
      out.result({ migrated: true }, () => out.line('migrations applied'));
    });
  for (const c of program.commands) c.exitOverride().configureOutput({ writeOut: ctx.io.stdout, writeErr: ctx.io.stderr });
  return program;
}

/** Run the CLI; returns the exit code instead of exiting, so tests can run it in-process. */
export async function main(argv: string[], io: Io = processIo): Promise<number> {
  const json = argv.includes('--json');
  try {
    await programBuild(commandContext(io)).parseAsync(argv, { from: 'user' });
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
