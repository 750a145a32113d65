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
  /**
   * Attempts ended (completed, failed, released, cancelled, waiting on subtasks, output submitted for validation):
   * their attempts rows are written, perhaps not yet committed. The trace emitter listens (tracing.ts).
   */
  attemptsEnded: [{ refs: Array<{ taskId: string; fence: number }> }];
  /** DAGs that completed or were cancelled (perhaps not yet committed). */
  dagsFinished: [{ dagIds: string[] }];
  /** An event stream was cut off because its reader fell too far behind. */
  streamDropped: [{ tokenId: string | null }];
  /**
   * An attempt's git worktree (runtime/attempt-workspace.ts): made, its work committed (with its size), or refused
   * (a workspace_* class: a cap, an unusable repository).
   */
  workspace: [{ result: 'made' | 'committed' | 'refused'; diskBytes?: number; errorClass?: string }];
}

class EngineEvents extends EventEmitter<EngineEventMap> {}

export const engineEvents = new EngineEvents();
engineEvents.setMaxListeners(100);

/** Say these attempts ended, building the list only when someone listens (tracing is off by default). */
export function attemptsEndedEmit(refs: () => Array<{ taskId: string; fence: number }>): void {
  if (engineEvents.listenerCount('attemptsEnded') === 0) return;
  const list = refs();
  if (list.length) engineEvents.emit('attemptsEnded', { refs: list });
}

/** Say these DAGs finished, when someone listens. */
export function dagsFinishedEmit(dagIds: readonly string[]): void {
  if (dagIds.length && engineEvents.listenerCount('dagsFinished') > 0) engineEvents.emit('dagsFinished', { dagIds: [...dagIds] });
}
