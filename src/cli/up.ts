import type { Command } from 'commander';
import { CONFIG_DEFAULTS, configFromEnv } from '../config/index.js';
import { InvalidInputError } from '../errors.js';
import { LOOP_NAMES, LOOPS_ELECTED } from '../maintenance/index.js';
import { agentModuleLoad } from '../runtime/agent-load.js';
import type { FleetMember } from '../runtime/fleet.js';
import { nodeStart } from '../node.js';
import { withDatabase, type CommandContext } from './context.js';
import { shutdownSignal } from './signals.js';

/**
 * Long-running service mode: the maintenance loops, the HTTP API and the agents named by --agent or DAGENT_AGENTS
 * (nodeStart), until SIGINT or SIGTERM. Any number of `dagent up` processes may run; each loop runs on one of them
 * at a time (its lease).
 */
export function upCommand(program: Command, ctx: CommandContext): void {
  program
    .command('up')
    .description('run the maintenance loops, the HTTP API and dashboard, and any configured agents until SIGINT/SIGTERM')
    .addHelpText('after', `\nMaintenance loops: ${LOOP_NAMES.join(', ')}.\nEach but ${LOOP_NAMES.filter((n) => !LOOPS_ELECTED.includes(n)).join(' and ')} runs on one process at a time across all that run them (its lease).`)
    .option('-a, --agent <file[:concurrency]>', 'also run this agent module (repeatable; adds to DAGENT_AGENTS)', (v: string, prev: string[]) => [...prev, v], [])
    .option('--port <n>', `HTTP API and dashboard port (DAGENT_HTTP_PORT; default ${CONFIG_DEFAULTS.httpPort}; 0 picks a free one)`)
    .option('--host <addr>', `address to bind (DAGENT_HTTP_HOST; default ${CONFIG_DEFAULTS.httpHost}: this machine only)`)
    .option('--no-http', 'do not serve the HTTP API, dashboard and metrics')
    .option('--metrics-public', 'serve /metrics without a token')
    .action(async (opts: { agent: string[]; port?: string; host?: string; http: boolean; metricsPublic?: boolean }) => {
      const cfg = configFromEnv({ ...ctx.io.env, ...(opts.port !== undefined ? { DAGENT_HTTP_PORT: opts.port } : {}), ...(opts.host ? { DAGENT_HTTP_HOST: opts.host } : {}) });
      const specs = [...cfg.agents, ...opts.agent];
      const members = await Promise.all(specs.map(fleetMemberLoad));
      // Handled from here on: a signal while the node starts (its agents may already run tasks) stops it cleanly once
      // it has started, as one sent after the banner does.
      const stopping = shutdownSignal((s) => ctx.io.stderr(`dagent up: ${s} ignored: already stopping (SIGKILL forces it)\n`), ctx.io.env);
      await withDatabase(ctx, async (d) => {
        const node = await nodeStart({
          database: d, log: ctx.log, agents: members, instance: cfg.agentInstance, maxQueued: cfg.maxQueued, retentionSec: cfg.retentionSec, retentionStreamsSec: cfg.retentionStreamsSec, loopLeaseSec: cfg.loopLeaseSec,
          workspaces: { root: cfg.workspaceRoot, keptSec: cfg.retentionWorkspacesSec, repoUrls: cfg.workspaceRepoUrls },
          http: opts.http ? { port: cfg.httpPort, host: cfg.httpHost, fileRoots: cfg.fileRoots, metricsPublic: opts.metricsPublic, checkResponses: cfg.checkResponses } : undefined,
          onUnready: (message) => ctx.io.stderr(`dagent up: ${message}; the other agents and the loops run on\n`),
        }).catch((e: NodeJS.ErrnoException) => {
          if (e.code !== 'EADDRINUSE' && e.code !== 'EACCES' && e.code !== 'EADDRNOTAVAIL') throw e;
          const why = e.code === 'EADDRINUSE' ? 'is in use' : e.code === 'EACCES' ? 'needs privileges' : 'is not an address of this machine';
          throw new InvalidInputError(`cannot listen on ${cfg.httpHost}:${cfg.httpPort}: it ${why} (${e.code}); choose another with --port or DAGENT_HTTP_PORT (and DAGENT_HTTP_HOST), or --no-http`);
        });
        try {
          const agents = node.agents.length ? `; agents ${node.agents.map((r) => r.id).join(', ')}` : '';
          ctx.io.stdout(`dagent up: ${node.loops.map((s) => s.name).join(', ')} running${agents}; stop with Ctrl-C or SIGTERM\n`);
          if (node.url) ctx.io.stdout(`dagent up: HTTP API and dashboard on ${node.url}/ (token: dagent tokens create --role admin)\n`);
          const signal = await stopping;
          ctx.log.info({ signal }, 'stopping');
        } finally {
          await node.stop();
        }
        ctx.io.stdout('dagent up: stopped\n');
      });
    });
}

async function fleetMemberLoad(spec: string): Promise<FleetMember> {
  const m = /^(.+?)(?::(\d+))?$/.exec(spec);
  if (!m) throw new InvalidInputError(`agent ${spec}: expected file or file:concurrency`);
  const concurrency = m[2] === undefined ? undefined : Number(m[2]);
  if (concurrency === 0) throw new InvalidInputError(`agent ${spec}: concurrency must be at least 1`);
  return { def: await agentModuleLoad(m[1]!), concurrency };
}
