import { EventEmitter } from 'node:events';

/**
 * What the engine did in this process, as typed in-process events: metrics (and
 * anything else that wants them) subscribe here instead of the engine calling
 * them. Emitted after the statement that did it returned; an emitter with no
 * listener costs one function call.
 */
export interface EngineEventMap {
  /** A claim ran: how many it asked for, and each claimed task's type and seconds spent READY. */
  claim: [{ agentId: string; requested: number; claimed: Array<{ type: string; waitSec: number }> }];
  /** Tasks completed (validated if they declare validation), counted by type. */
  completed: [{ byType: Record<string, number> }];
  /** An attempt failed and the retry policy decided: retrying, ready again, or dead-lettered (with the reason). */
  failed: [{ type: string; errorClass: string; outcome: 'retrying' | 'ready' | 'dead_lettered' | 'rate_limited'; reason?: string }];
  /** The reaper took a lease back from a quiet agent. */
  reaped: [{ agentId: string | null; reason: 'claim_ttl' | 'heartbeat' | 'max_duration' }];
  /** An event stream was cut off because its reader fell too far behind. */
  streamDropped: [{ tokenId: string | null }];
}

class EngineEvents extends EventEmitter<EngineEventMap> {}

export const engineEvents = new EngineEvents();
engineEvents.setMaxListeners(100);
