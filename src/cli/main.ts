import { Command, CommanderError } from 'commander';
import { DagValidationError, DagentError } from '../errors.js';
import { CONFIG_DEFAULTS } from '../config/defaults.js';
import { COMMAND_MODULES } from './commands.js';
import { commandContext, type CommandContextLazy } from './context.js';
import { exitCodeFor } from './exit-codes.js';
import { processIo, type Io } from './output.js';
import { jsonForTerminal, terminalSafeLines } from '../terminal-text.js';

/**
 * The program, with the commands `argv` runs defined in full: only their module is loaded. Without
 * a known command (`dagent`, `--help`, a typo), every command is listed by its one line, loading none;
 * `all` defines every command in full (the help audit).
 */
export async function programBuild(ctx: CommandContextLazy, argv: string[], o: { all?: boolean } = {}): Promise<Command> {
  const program = new Command('dagent')
    .description('DAG-aware work orchestrator for fleets of AI agents, on PostgreSQL')
    .version('0.1.0')
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({ writeOut: ctx.io.stdout, writeErr: ctx.io.stderr })
    .hook('preAction', () => ctx.ready());
  const words = argv.filter((a) => !a.startsWith('-'));
  const wanted = words[0] === 'help' ? words[1] : words[0];
  const chosen = COMMAND_MODULES.filter((m) => o.all || (wanted !== undefined && wanted in m.commands));
  for (const m of chosen) (await m.load())(program, ctx);
  if (chosen.length === 0) {
    for (const m of COMMAND_MODULES) for (const [name, line] of Object.entries(m.commands)) program.command(name).description(line);
  }
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
    const ctx = commandContext(io, longRunning ? CONFIG_DEFAULTS.logLevel : CONFIG_DEFAULTS.commandLogLevel);
    await (await programBuild(ctx, argv)).parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    const code = exitCodeFor(err);
    if (err instanceof CommanderError) return code;
    if (json) {
      const e = err instanceof DagentError ? { code: err.code, message: err.message, ...err.details } : { code: 'INTERNAL', message: String(err) };
      io.stdout(`${jsonForTerminal({ error: e }, 2)}\n`);
    }
    // A message may quote what a file or an agent said: its lines reach the terminal as text (terminal-text.ts).
    if (err instanceof DagValidationError) io.stderr(`${terminalSafeLines(err.message)}\n${err.problems.length} problem(s); nothing was written\n`);
    else if (err instanceof DagentError) io.stderr(`error: ${terminalSafeLines(err.message)}\n`);
    else io.stderr(`error: ${terminalSafeLines((err as Error)?.stack ?? String(err))}\n`);
    return code;
  }
}
