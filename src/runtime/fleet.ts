import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { AgentRunner } from './agent-runner.js';
import type { AgentDefinition } from './define-agent.js';
import { ReadyListener } from '../db/ready-listener.js';
import { DagentError } from '../errors.js';

export interface FleetMember {
  def: AgentDefinition;
  id?: string;
  concurrency?: number;
}

/** Several agents in one process, sharing one LISTEN connection. */
export class AgentFleet {
  readonly runners: AgentRunner[];
  private readonly listener: ReadyListener;
  private readonly ownsListener: boolean;

  /** `listener`: the process's LISTEN connection, when it already has one (dagent up shares it with the event stream). */
  /** `instance`: the agents' instance label (DAGENT_AGENT_INSTANCE; default the host name). */
  constructor(database: { db: Db; url: string; sessionUrl?: string }, members: FleetMember[], opts: { pollIntervalMs?: number; log: Logger; listener?: ReadyListener; instance?: string; handOff?: boolean }) {
    this.ownsListener = !opts.listener;
    this.listener = opts.listener ?? new ReadyListener({ url: database.sessionUrl ?? database.url, log: opts.log });
    // The same module twice in one process gets distinct ids as it starts (`shell-host`, `shell-host-2`): start is in order.
    this.runners = members.map((m) => new AgentRunner(m.def, {
      database, id: m.id, instance: opts.instance, concurrency: m.concurrency, pollIntervalMs: opts.pollIntervalMs, listener: this.listener, log: opts.log,
      handOff: opts.handOff,
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
    if (this.ownsListener) await this.listener.stop();
  }
}
