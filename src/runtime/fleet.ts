import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { AgentRunner, type AgentRunnerOptions } from './agent-runner.js';
import type { AgentDefinition } from './define-agent.js';
import { ReadyListener } from '../db/ready-listener.js';
import { groupProbe } from '../claim-wait/claim-when-ready.js';
import { ClaimWaiters } from '../claim-wait/waiters.js';
import { CLAIM_WAIT_DEFAULTS } from '../config/index.js';
import { DagentError } from '../errors.js';

export interface FleetMember {
  def: AgentDefinition;
  id?: string;
  concurrency?: number;
}

/** Several agents in one process, sharing one LISTEN connection and one place to wait for work. */
export class AgentFleet {
  readonly runners: AgentRunner[];
  private readonly listener: ReadyListener;
  private readonly ownsListener: boolean;
  private readonly waiters: ClaimWaiters;
  private readonly ownsWaiters: boolean;

  /**
   * `listener`: the process's LISTEN connection, when it already has one (dagent up shares it with the event stream).
   * `waiters`: the process's waiting claims on it (nodeStart shares them with the HTTP API and MCP). Default: the fleet's own.
   * `instance`: the agents' instance label (DAGENT_AGENT_INSTANCE; default the host name).
   */
  constructor(
    database: { db: Db; url: string; sessionUrl?: string }, members: FleetMember[],
    opts: { pollIntervalMs?: number; log: Logger; listener?: ReadyListener; waiters?: ClaimWaiters; instance?: string; handOff?: boolean; workspaces?: AgentRunnerOptions['workspaces'] },
  ) {
    this.ownsListener = !opts.listener;
    this.listener = opts.listener ?? new ReadyListener({ url: database.sessionUrl ?? database.url, log: opts.log });
    this.ownsWaiters = !opts.waiters;
    this.waiters = opts.waiters ?? new ClaimWaiters({
      databaseUrl: database.sessionUrl ?? database.url, log: opts.log, listener: this.listener,
      perAgent: CLAIM_WAIT_DEFAULTS.waitingPerAgent, max: CLAIM_WAIT_DEFAULTS.waitingMax, readyInGroup: groupProbe(database.db),
    });
    // The same module twice in one process gets distinct ids as it starts (`shell-host`, `shell-host-2`): start is in order.
    this.runners = members.map((m) => new AgentRunner(m.def, {
      database, id: m.id, instance: opts.instance, concurrency: m.concurrency, pollIntervalMs: opts.pollIntervalMs, listener: this.listener,
      waiters: this.waiters, log: opts.log, handOff: opts.handOff, workspaces: opts.workspaces,
    }));
  }

  /**
   * Start every agent. With `onUnready`, an agent whose preflight says it cannot work here (a missing API key) is
   * left out and reported, and the others start: one misconfigured agent does not stop `dagent up`.
   */
  async start(opts: { onUnready?: (message: string) => void } = {}): Promise<void> {
    if (this.ownsListener) await this.listener.start();
    for (const r of [...this.runners]) {
      try {
        await r.start();
      } catch (e) {
        if (!opts.onUnready || !(e instanceof DagentError && e.details.preflight === true)) throw e;
        this.runners.splice(this.runners.indexOf(r), 1);
        opts.onUnready(e.message);
      }
    }
  }

  /** Drain every agent (see AgentRunner.stop), then close the listener. */
  async stop(graceMs?: number): Promise<void> {
    await Promise.all(this.runners.map((r) => r.stop({ graceMs })));
    if (this.ownsWaiters) await this.waiters.close();
    if (this.ownsListener) await this.listener.stop();
  }
}
