import type { Db } from '../../db/handle.js';
import { taskRefusalRead } from '../../db/queries/tasks-refusal.js';
import type { CompletionResult, HandOff, RefusedRow } from '../../db/rows.js';
import { IllegalTransitionError, LeaseLostError, TransitionRacedError } from '../../errors.js';
import type { ClaimedTask } from './claim.js';
import { completionInput, completionWrite, type Completion } from './completion-write.js';
import type { CompletionOutcome, OutputOutcome } from './outcome.js';
import { completionRefusal } from './refusal.js';
import { taskOutputSettle } from './settle.js';

/** A batch of completion reports, answered item by item (attemptsComplete). */
export interface AttemptsCompleted {
  /** One per report, in the order given. */
  outcomes: CompletionOutcome[];
  /** Dependents the completion statement made READY. */
  unblocked: number;
  dagsCompleted: string[];
  completedByType: Record<string, number>;
  /** With `handTo`: the dependents handed to the completing agent, claimed for it. */
  handed: ClaimedTask[];
}

/**
 * The one way an agent's completion is reported, from the agent runtime (a batch), HTTP and MCP (one each).
 * One statement completes the batch (db/queries/tasks-complete.ts) and says, for each report it skipped, what
 * the row held (refusal.ts turns that into the answer, with no further read): an output that must be validated
 * goes through settle.ts; the same report made again (its reply was lost) is a replay; anything else is refused
 * with its reason. With `handTo` (one agent completing its own tasks), the dependents they unblock that a claim
 * of that agent would take first come back claimed for it (`handed`; tasks-hand-off.ts).
 * An output that cannot be stored fails the whole call (INVALID_INPUT), before anything is written.
 */
export async function attemptsComplete(db: Db, items: Completion[], opts: { handTo?: HandOff } = {}): Promise<AttemptsCompleted> {
  const r = await completionWrite(db, items.map((c) => completionInput(c)), { handTo: opts.handTo });
  const refused = new Map(r.refused.map((x) => [x.id, x]));
  const outcomes: CompletionOutcome[] = [];
  for (const c of items) outcomes.push(refused.has(c.taskId) ? await refusedSettle(db, c, refused.get(c.taskId)!) : { taskId: c.taskId, status: 'completed' });
  return { outcomes, unblocked: r.unblocked, dagsCompleted: r.dagsCompleted, completedByType: r.completedByType, handed: r.handed };
}

/** A report the statement skipped: settled, replayed or refused, as its row says. */
async function refusedSettle(db: Db, c: Completion, row: RefusedRow | null): Promise<CompletionOutcome> {
  const refusal = completionRefusal(c, row);
  switch (refusal.kind) {
    case 'settle':
      try {
        return { taskId: c.taskId, status: 'settled', settled: await taskOutputSettle(db, c) };
      } catch (e) {
        // The row moved on between the statement and settling it (taken back, or a verdict pending): as it is now.
        if (!(e instanceof LeaseLostError || e instanceof IllegalTransitionError)) throw e;
        const now = completionRefusal(c, await taskRefusalRead(db, c.taskId, c.fence, c.output ?? null));
        if (now.kind === 'replayed') return { taskId: c.taskId, ...now, status: 'replayed' };
        if (now.kind === 'refused' && now.error.code === 'CONFLICT') return { taskId: c.taskId, status: 'refused', error: now.error };
        return { taskId: c.taskId, status: 'refused', error: e };
      }
    case 'replayed':
      return { taskId: c.taskId, status: 'replayed', completed: refusal.completed };
    case 'refused':
      return { taskId: c.taskId, status: 'refused', error: refusal.error };
    case 'race': {
      // The snapshot showed a row the guard should have matched: it changed meanwhile. As it is now, once.
      const now = await taskRefusalRead(db, c.taskId, c.fence, c.output ?? null);
      const again = completionRefusal(c, now);
      return again.kind === 'race' || again.kind === 'settle'
        ? { taskId: c.taskId, status: 'refused', error: new TransitionRacedError(c.taskId, 'complete', now?.status ?? 'unknown') }
        : refusedSettle(db, c, now);
    }
    default: {
      const unknown: never = refusal;
      throw new Error(`unknown refusal: ${JSON.stringify(unknown)}`);
    }
  }
}

/**
 * Complete one task (HTTP, MCP, an embedding program). Throws the refusal's error (LeaseLostError,
 * IllegalTransitionError, ConflictError, NotFoundError). A task that declares output validation (or is a
 * validation task) is settled instead: `settled` says whether it completed, waits in VALIDATING or was rejected;
 * `replayed`: the same completion was already applied (its reply was lost).
 */
export async function taskComplete(db: Db, c: Completion): Promise<CompletionResult & { settled?: OutputOutcome; replayed?: boolean }> {
  const r = await attemptsComplete(db, [c]);
  const o = r.outcomes[0]!;
  const base = { unblocked: r.unblocked, dagsCompleted: r.dagsCompleted, completedByType: r.completedByType };
  switch (o.status) {
    case 'completed': return { ...base, completed: [c.taskId] };
    case 'settled': return { ...base, completed: [], settled: o.settled };
    case 'replayed': return { ...base, completed: o.completed ? [c.taskId] : [], replayed: true };
    case 'refused': throw o.error;
  }
}

/**
 * Complete a batch (attemptsComplete), answered as lists: refused items (stale token, wrong state, another
 * result already recorded) are in `refused`, never thrown across the batch; `settled` holds the outcomes of
 * outputs that went through validation; `replayed` the reports already applied.
 */
export async function taskCompleteMany(
  db: Db, items: Completion[], opts: { handTo?: HandOff } = {},
): Promise<CompletionResult & { refused: string[]; settled: Map<string, OutputOutcome>; replayed: string[]; handed: ClaimedTask[] }> {
  const r = await attemptsComplete(db, items, opts);
  const ids = (status: CompletionOutcome['status']) => r.outcomes.filter((o) => o.status === status).map((o) => o.taskId);
  const settled = new Map(r.outcomes.flatMap((o) => (o.status === 'settled' ? [[o.taskId, o.settled] as const] : [])));
  return {
    completed: ids('completed'), unblocked: r.unblocked, dagsCompleted: r.dagsCompleted, completedByType: r.completedByType,
    refused: ids('refused'), settled, replayed: ids('replayed'), handed: r.handed,
  };
}
