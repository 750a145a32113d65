import type { Command } from 'commander';
import { CONFIG_DEFAULTS, configFromEnv } from '../config/index.js';
import { InvalidInputError } from '../errors.js';
import { maintenanceServices } from '../maintenance/index.js';
import { agentModuleLoad } from '../runtime/agent-load.js';
import { AgentFleet, type FleetMember } from '../runtime/fleet.js';
import { withDatabase, type CommandContext } from './context.js';
import { shutdownSignal } from './signals.js';
import { httpServerCreate } from '../http/server.js';
import { EVENTS_CHANNEL, READY_CHANNEL } from '../db/statement.js';
import { ReadyListener } from '../db/ready-listener.js';

/**
 * Long-running service mode: the maintenance loops (reaper, promoter, scheduler, priority refresher, …) and the
 * agents named by --agent or DAGENT_AGENTS, until SIGINT or SIGTERM. Any number
 * of `dagent up` processes may run; each duty runs once per interval
 * cluster-wide (cadence gate).
 */
export function upCommand(program: Command, ctx: CommandContext): void {
  program
    .command('up')
    .description('run the maintenance loops (reaper, promoter, scheduler, deps-reconciler, priority-refresher, duration-learner) and any configured agents until SIGINT/SIGTERM')
    .option('-a, --agent <file[:concurrency]>', 'also run this agent module (repeatable; adds to DAGENT_AGENTS)', (v: string, prev: string[]) => [...prev, v], [])
    .option('--port <n>', `HTTP API and dashboard port (DAGENT_HTTP_PORT; default ${CONFIG_DEFAULTS.httpPort}; 0 picks a free one)`)
    .option('--host <addr>', `address to bind (DAGENT_HTTP_HOST; default ${CONFIG_DEFAULTS.httpHost}: this machine only)`)
    .option('--no-http', 'do not serve the HTTP API, dashboard and metrics')
    .option('--metrics-public', 'serve /metrics without a token')
    .action(async (opts: { agent: string[]; port?: string; host?: string; http: boolean; metricsPublic?: boolean }) => {
      const cfg = configFromEnv({ ...ctx.io.env, ...(opts.port !== undefined ? { DAGENT_HTTP_PORT: opts.port } : {}), ...(opts.host ? { DAGENT_HTTP_HOST: opts.host } : {}) });
      const specs = [...cfg.agents, ...opts.agent];
      const members = await Promise.all(specs.map(fleetMemberLoad));
      await withDatabase(ctx, async (d) => {
        const services = maintenanceServices(d.db, ctx.log, { maxQueued: cfg.maxQueued, retentionSec: cfg.retentionSec });
        // One LISTEN connection for the whole process: the agents' wake-ups and the event stream share it.
        const listener = new ReadyListener({ url: d.sessionUrl, log: ctx.log, channels: [READY_CHANNEL, EVENTS_CHANNEL] });
        const fleet = new AgentFleet(d, members, { log: ctx.log, listener, instance: cfg.agentInstance });
        let http: Awaited<ReturnType<typeof httpServerCreate>> | undefined;
        try {
          services.forEach((s) => s.start());
          await listener.start();
          await fleet.start({ onUnready: (message) => ctx.io.stderr(`dagent up: ${message}; the other agents and the loops run on\n`) });
          http = opts.http
            ? await httpServerCreate({ db: d.db, databaseUrl: d.sessionUrl, log: ctx.log, maxQueued: cfg.maxQueued, fileRoots: cfg.fileRoots, metricsPublic: opts.metricsPublic, listener, checkResponses: cfg.checkResponses })
            : undefined;
          const url = await http?.listen(cfg.httpPort, cfg.httpHost).catch((e: NodeJS.ErrnoException) => {
            if (e.code !== 'EADDRINUSE' && e.code !== 'EACCES' && e.code !== 'EADDRNOTAVAIL') throw e;
            const why = e.code === 'EADDRINUSE' ? 'is in use' : e.code === 'EACCES' ? 'needs privileges' : 'is not an address of this machine';
            throw new InvalidInputError(`cannot listen on ${cfg.httpHost}:${cfg.httpPort}: it ${why} (${e.code}); choose another with --port or DAGENT_HTTP_PORT (and DAGENT_HTTP_HOST), or --no-http`);
          });
          const agents = fleet.runners.length ? `; agents ${fleet.runners.map((r) => r.id).join(', ')}` : '';
          ctx.io.stdout(`dagent up: ${services.map((s) => s.name).join(', ')} running${agents}; stop with Ctrl-C or SIGTERM\n`);
          if (url) ctx.io.stdout(`dagent up: HTTP API and dashboard on ${url}/ (token: dagent tokens create --role admin)\n`);
          const signal = await shutdownSignal((s) => ctx.io.stderr(`dagent up: ${s} ignored: already stopping (SIGKILL forces it)\n`), ctx.io.env);
          ctx.log.info({ signal }, 'stopping');
        } finally {
          // Also when starting failed (a port in use): nothing this process started is left running.
          await http?.close().catch(() => {});
          await fleet.stop();
          await listener.stop();
          await Promise.all(services.map((s) => s.stop()));
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
