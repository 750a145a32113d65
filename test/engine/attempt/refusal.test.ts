import { afterAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagCreate, leaseExpire } from '../../helpers/factories.js';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { attemptsComplete, taskComplete } from '../../../src/engine/attempt/complete.js';
import { taskFail } from '../../../src/engine/attempt/fail.js';
import { completionRefusal, failureRefusal, guardRefusal } from '../../../src/engine/attempt/refusal.js';
import type { RefusedRow } from '../../../src/db/rows.js';
import { ConflictError, IllegalTransitionError, LeaseLostError, NotFoundError } from '../../../src/errors.js';

/**
 * Statements sent to PostgreSQL while `fn` runs, BEGIN/COMMIT/ROLLBACK left out. The pool's connections bind their
 * query method when they connect (db/open.ts), so it is wrapped before this file's database is opened.
 */
let recording: string[] | null = null;
const pgQuery = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const q = args[0] as string | { text?: string };
  const text = typeof q === 'string' ? q : q?.text ?? '';
  if (recording && !/^\s*(begin|commit|rollback)\b/i.test(text)) recording.push(text);
  return (pgQuery as (...a: unknown[]) => unknown).apply(this, args);
} as typeof pgQuery;
afterAll(() => { pg.Client.prototype.query = pgQuery; });

async function statementsOf<T>(fn: () => Promise<T>): Promise<{ result: T | Error; statements: string[] }> {
  const statements: string[] = [];
  recording = statements;
  try {
    return { result: await fn().catch((e: Error) => e), statements };
  } finally {
    recording = null;
  }
}

const { db } = await testDatabase();

/** A refused row as a statement returns it, for the pure cases. */
function row(over: Partial<RefusedRow>): RefusedRow {
  return { status: 'running', fence: 1, validated: false, outcome: null, errorClass: null, errorMessage: null, reaped: false, sameOutput: false, runAt: null, deadLetter: null, ...over };
}
const ref = { taskId: 'tsk_1', fence: 1 };

describe('a refusal, from the row the statement returned (pure)', () => {
  it('no row is NOT_FOUND; another fence or a state that holds no lease is LEASE_LOST; a leased state the transition does not leave is ILLEGAL_TRANSITION', () => {
    expect(guardRefusal(ref, 'complete', null)).toBeInstanceOf(NotFoundError);
    expect(guardRefusal(ref, 'complete', row({ fence: 2 }))).toBeInstanceOf(LeaseLostError);
    expect(guardRefusal(ref, 'complete', row({ status: 'ready' }))).toBeInstanceOf(LeaseLostError);
    expect(guardRefusal(ref, 'start', row({ status: 'running' }))).toBeInstanceOf(IllegalTransitionError);
    expect(guardRefusal(ref, 'complete', row({ status: 'running' }))).toBe('race');
  });

  it('a completion: the same output again is a replay, another output or an attempt that failed is a CONFLICT, a validated output still held is settled', () => {
    expect(completionRefusal(ref, row({ status: 'completed', sameOutput: true }))).toEqual({ kind: 'replayed', completed: true });
    expect(completionRefusal(ref, row({ status: 'completed', sameOutput: true, validated: true }))).toEqual({ kind: 'replayed', completed: false });
    expect(completionRefusal(ref, row({ status: 'validating', validated: true, sameOutput: true }))).toEqual({ kind: 'replayed', completed: false });
    const other = completionRefusal(ref, row({ status: 'completed', sameOutput: false }));
    expect(other.kind === 'refused' && other.error).toBeInstanceOf(ConflictError);
    const failed = completionRefusal(ref, row({ status: 'ready', outcome: 'failed', errorClass: 'crash' }));
    expect(failed.kind === 'refused' && failed.error.message).toMatch(/already failed \(crash\)/);
    // The reaper failed it (the lease lapsed): the holder lost its lease, it did not contradict itself.
    const reaped = completionRefusal(ref, row({ status: 'ready', outcome: 'failed', errorClass: 'crash', reaped: true }));
    expect(reaped.kind === 'refused' && reaped.error).toBeInstanceOf(LeaseLostError);
    expect(completionRefusal(ref, row({ validated: true }))).toEqual({ kind: 'settle' });
    const stale = completionRefusal(ref, row({ validated: true, fence: 2 }));
    expect(stale.kind === 'refused' && stale.error).toBeInstanceOf(LeaseLostError);
    expect(completionRefusal(ref, row({}))).toEqual({ kind: 'race' });
  });

  it('a failure: the same failure again gets its outcome, a different result is a CONFLICT; the reaper never replays, and a row that still matches is a race it lost', () => {
    const f = { ...ref, errorClass: 'crash', message: 'boom' };
    const runAt = new Date('2026-01-01T00:00:00Z');
    expect(failureRefusal(f, row({ status: 'retrying', outcome: 'failed', errorClass: 'crash', errorMessage: 'boom', runAt }))).toEqual({ replayed: { status: 'retrying', retryAt: runAt } });
    const dl = { id: 'dlq_1', reason: 'exhausted', poisonPill: false };
    expect(failureRefusal(f, row({ status: 'dead_lettered', outcome: 'failed', errorClass: 'crash', errorMessage: 'boom', deadLetter: dl })))
      .toEqual({ replayed: { status: 'dead_lettered', deadLetterId: 'dlq_1', reason: 'exhausted', poisonPill: false } });
    const other = failureRefusal(f, row({ status: 'retrying', outcome: 'failed', errorClass: 'crash', errorMessage: 'other' }));
    expect('error' in (other as object) && (other as { error: Error }).error).toBeInstanceOf(ConflictError);
    const lapsed = failureRefusal({ ...f, errorClass: 'tool_error' }, row({ status: 'ready', outcome: 'failed', errorClass: 'crash', errorMessage: 'lease', reaped: true }));
    expect((lapsed as { error: Error }).error).toBeInstanceOf(LeaseLostError);
    const done = failureRefusal(f, row({ status: 'completed', outcome: 'completed' }));
    expect((done as { error: Error }).error.message).toMatch(/already completed/);
    const reaped = failureRefusal(f, row({ status: 'retrying', outcome: 'failed', errorClass: 'crash', errorMessage: 'boom' }), true);
    expect((reaped as { error: Error }).error).toBeInstanceOf(LeaseLostError);
    expect((failureRefusal(f, row({}), true) as { error: Error }).error.message).toMatch(/changed meanwhile/);
    expect(failureRefusal(f, row({}))).toBe('race');
  });
});


describe('a refused report says why from its own statement', () => {
  async function held(name: string, extra = ''): Promise<{ id: string; fence: number; dagId: string }> {
    const dagId = await dagCreate(db, `name: ${name}\ntasks:\n  a: { type: t${extra} }\n`);
    await agentCreate(db, `${name}-agent`);
    const [t] = await taskClaim(db, `${name}-agent`);
    return { id: t!.id, fence: t!.fence, dagId };
  }

  it('a stale fence, a replay, another output and a missing task: each answered by the completion statement alone', async () => {
    const t = await held('refused-one');
    await taskComplete(db, { taskId: t.id, fence: t.fence, output: { n: 1 } });

    const replay = await statementsOf(() => taskComplete(db, { taskId: t.id, fence: t.fence, output: { n: 1 } }));
    expect(replay.result).toMatchObject({ replayed: true, completed: [t.id] });
    expect(replay.statements).toHaveLength(1);

    const other = await statementsOf(() => taskComplete(db, { taskId: t.id, fence: t.fence, output: { n: 2 } }));
    expect(other.result).toBeInstanceOf(ConflictError);
    expect(other.statements).toHaveLength(1);

    const stale = await statementsOf(() => taskComplete(db, { taskId: t.id, fence: t.fence + 1, output: { n: 1 } }));
    expect(stale.result).toBeInstanceOf(LeaseLostError);
    expect(stale.statements).toHaveLength(1);

    const missing = await statementsOf(() => taskComplete(db, { taskId: 'tsk_nosuchtask0000', fence: 1, output: null }));
    expect(missing.result).toBeInstanceOf(NotFoundError);
    expect(missing.statements).toHaveLength(1);
  });

  it('a batch: each item gets its own answer, in order, from one statement', async () => {
    const a = await held('refused-batch-a');
    const b = await held('refused-batch-b');
    const c = await held('refused-batch-c');
    await taskComplete(db, { taskId: b.id, fence: b.fence, output: 'b' });
    const r = await statementsOf(() => attemptsComplete(db, [
      { taskId: a.id, fence: a.fence, output: 'a' },
      { taskId: b.id, fence: b.fence, output: 'b' },
      { taskId: c.id, fence: c.fence + 5, output: 'c' },
    ]));
    expect(r.statements).toHaveLength(1);
    const outcomes = (r.result as Awaited<ReturnType<typeof attemptsComplete>>).outcomes;
    expect(outcomes.map((o) => [o.taskId, o.status])).toEqual([[a.id, 'completed'], [b.id, 'replayed'], [c.id, 'refused']]);
    expect(outcomes[2]!.status === 'refused' && outcomes[2]!.error).toBeInstanceOf(LeaseLostError);
  });

  it('a validated output still held is settled without a lookup between the statement and its settlement', async () => {
    const t = await held('refused-settle', ', output: { validation: { kind: regex, pattern: "^ok$" } }');
    const r = await statementsOf(() => taskComplete(db, { taskId: t.id, fence: t.fence, output: 'ok' }));
    expect(r.result).toMatchObject({ settled: { status: 'completed' } });
    // The completion statement, then the settlement's lock of the row, then the checked completion.
    expect(r.statements[0]).toMatch(/jsonb_to_recordset/);
    expect(r.statements[1]).toMatch(/for update/);
    expect(r.statements).toHaveLength(3);
  });

  it('a failure reported again, or after the reaper failed the attempt: answered by the failure statement alone', async () => {
    const t = await held('refused-fail');
    const first = await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'crash', message: 'boom' });
    const again = await statementsOf(() => taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'crash', message: 'boom' }));
    expect(again.result).toEqual(first);
    expect(again.statements.filter((s) => /update tasks/i.test(s))).toHaveLength(1);
    expect(again.statements).toHaveLength(1);

    const u = await held('refused-fail-late');
    await leaseExpire(db, u.id);
    await taskFail(db, { taskId: u.id, fence: u.fence, errorClass: 'crash', message: 'lease expired' }, { reapCondition: 'lease_expired' });
    const late = await statementsOf(() => taskComplete(db, { taskId: u.id, fence: u.fence, output: 'late' }));
    expect(late.result).toBeInstanceOf(LeaseLostError);
    expect(late.statements).toHaveLength(1);
  });
});
