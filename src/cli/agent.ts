import type { Command } from 'commander';
import { agentModuleLoad } from '../runtime/agent-load.js';
import { nodeStart } from '../node.js';
import { AGENT_ID_PATTERN, AGENT_INSTANCE_PATTERN, configFromEnv } from '../config/index.js';
import { InvalidInputError } from '../errors.js';
import { SHUTDOWN_GRACE_MS_DEFAULT } from '../runtime/agent-runner.js';
import { withDatabase, type CommandContext } from './context.js';
import { positiveInt } from './inspect.js';
import { shutdownSignal } from './signals.js';

/** `dagent agent run FILE`: one agent as a long-lived process; any number of them share one database. */
export function agentCommands(program: Command, ctx: CommandContext): void {
  const agent = program.command('agent').description('run agents');
  agent
    .command('run')
    .description('run the agent a file defines (export default defineAgent({...})) until SIGINT/SIGTERM')
    .argument('<file>', 'agent module, e.g. agents/shell.ts')
    .option('--id <id>', 'agent id (default <name>-<instance>, the same across restarts; <name>-<instance>-2 and on while another live process holds it)')
    .option('--instance <label>', 'instance label of the default id (DAGENT_AGENT_INSTANCE; default the host name)')
    .option('--concurrency <n>', 'tasks run at once (default: the agent\'s maxConcurrent)', positiveInt('--concurrency'))
    .option('--poll-ms <ms>', 'fallback poll interval when no notification arrives (default 2000)', positiveInt('--poll-ms'))
    .option('--grace-sec <s>', `on shutdown, how long running tasks may finish before release (default ${SHUTDOWN_GRACE_MS_DEFAULT / 1000})`, positiveInt('--grace-sec'))
    .option('--no-maintenance', 'do not run the maintenance loops here (by default every dagent process runs them; each duty runs once per interval across all)')
    .action(async (file: string, opts: { id?: string; instance?: string; concurrency?: number; pollMs?: number; graceSec?: number; maintenance: boolean }) => {
      if (opts.id !== undefined && !AGENT_ID_PATTERN.test(opts.id)) throw new InvalidInputError(`--id: "${opts.id}" is not an agent id: letters, digits, _ . : - (at most 128, starting with a letter or digit)`, { field: 'id' });
      if (opts.instance !== undefined && !AGENT_INSTANCE_PATTERN.test(opts.instance)) throw new InvalidInputError(`--instance: "${opts.instance}" is not an instance label: letters, digits, _ . : - (at most 64, starting with a letter or digit)`, { field: 'instance' });
      const cfg = configFromEnv(ctx.io.env);
      const instance = opts.instance ?? cfg.agentInstance;
      const def = await agentModuleLoad(file);
      // Handled from here on: a signal while the agent starts (its first tasks may already run) stops it cleanly
      // once it has started, as one sent after the banner does.
      let name = 'agent';
      const stopping = shutdownSignal((s) => ctx.io.stderr(`${name}: ${s} ignored: already stopping (SIGKILL forces it)\n`), ctx.io.env);
      await withDatabase(ctx, async (d) => {
        // Retries, reaping and schedules must not depend on a `dagent up` somewhere: each loop's lease
        // (maintenance/service.ts) gives it to one process at a time, however many run them.
        const node = await nodeStart({
          database: d, log: ctx.log, agents: [{ def, id: opts.id, concurrency: opts.concurrency }], instance, pollIntervalMs: opts.pollMs,
          maintenance: opts.maintenance, maxQueued: cfg.maxQueued, retentionSec: cfg.retentionSec, retentionStreamsSec: cfg.retentionStreamsSec, loopLeaseSec: cfg.loopLeaseSec,
          workspaces: { root: cfg.workspaceRoot, keptSec: cfg.retentionWorkspacesSec, repoUrls: cfg.workspaceRepoUrls },
        });
        const r = node.agents[0]!;
        const loops = node.loops.length ? ` and the maintenance loops (${node.loops.map((s) => s.name).join(', ')})` : '';
        name = `agent ${r.id}`;
        ctx.io.stdout(`agent ${r.id} (${def.name}) running with capabilities [${def.capabilities.join(', ')}]${loops}; stop with Ctrl-C or SIGTERM\n`);
        const signal = await stopping;
        ctx.io.stdout(`agent ${r.id}: ${signal}, draining ${r.running} running task(s)\n`);
        await node.stop(opts.graceSec === undefined ? undefined : opts.graceSec * 1000);
        ctx.io.stdout(`agent ${r.id}: stopped\n`);
      });
    });
}
