import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { attemptLogAppend, attemptLogsGet } from '../../../src/engine/read/attempt-logs.js';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { taskFail } from '../../../src/engine/attempt/fail.js';
import { databaseOpen } from '../../../src/db/open.js';
import { LIMITS } from '../../../src/config/index.js';
import { LeaseLostError } from '../../../src/errors.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, databaseReset, dagCreate, rowsOf } from '../../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
beforeEach(() => databaseReset(db));

async function held(maxAttempts = 2) {
  const dagId = await dagCreate(db, `name: logged\ntasks:\n  work: { type: w, max_attempts: ${maxAttempts}, retry: { strategy: immediate } }\n`);
  await agentCreate(db, 'logger');
  const [t] = await taskClaim(db, 'logger', { start: true });
  return { dagId, task: t!, ref: { taskId: t!.id, fence: t!.fence } };
}

describe('per-attempt logs', () => {
  it('the holder appends lines in order, with levels and fields; they are read back per attempt, and a later attempt has its own', async () => {
    const { task, ref } = await held();
    expect(await attemptLogAppend(db, ref, [
      { level: 'info', message: 'reading', fields: { file: 'a.ts' } },
      { level: 'warn', message: 'slow provider' },
      { level: 'nonsense', message: 'a level no one knows is info' },
    ])).toEqual({ stored: 3, dropped: 0 });
    await taskFail(db, { ...ref, errorClass: 'crash', message: 'boom' });
    // Its lease is gone: a late line is refused, and nothing joins the ended attempt.
    await expect(attemptLogAppend(db, ref, [{ message: 'too late' }])).rejects.toBeInstanceOf(LeaseLostError);
    const [again] = await taskClaim(db, 'logger', { start: true });
    expect(again!.id).toBe(task.id);
    await attemptLogAppend(db, { taskId: again!.id, fence: again!.fence }, [{ level: 'error', message: 'second try' }]);

    const latest = await attemptLogsGet(db, task.id);
    expect(latest.attempts.map((a) => [a.attempt, a.lines, a.dropped])).toEqual([[1, 3, 0], [2, 1, 0]]);
    expect(latest.attempt).toMatchObject({ attempt: 2, running: true, entries: [{ level: 'error', message: 'second try', fields: null }] });
    const first = await attemptLogsGet(db, task.id, { attempt: 1 });
    expect(first.attempt!.running).toBe(false);
    expect(first.attempt!.entries.map((l) => [l.level, l.message, l.fields])).toEqual([
      ['info', 'reading', { file: 'a.ts' }], ['warn', 'slow provider', null], ['info', 'a level no one knows is info', null],
    ]);
    // Paging: after a line's id, only the lines after it.
    const after = await attemptLogsGet(db, task.id, { attempt: 1, after: first.attempt!.entries[0]!.id });
    expect(after.attempt!.entries.map((l) => l.message)).toEqual(['slow provider', 'a level no one knows is info']);
    await expect(attemptLogsGet(db, task.id, { attempt: 7 })).rejects.toThrow(/log of attempt 7 of task/);
  });

  it('an attempt keeps its allowance of lines and bytes; the rest is counted as dropped, and what is kept is the beginning', async () => {
    const { task, ref } = await held();
    const many = Array.from({ length: 700 }, (_, i) => ({ message: `line ${i}` }));
    expect(await attemptLogAppend(db, ref, many)).toEqual({ stored: 700, dropped: 0 });
    expect(await attemptLogAppend(db, ref, many)).toEqual({ stored: LIMITS.logLinesPerAttempt - 700, dropped: 1400 - LIMITS.logLinesPerAttempt });
    expect(await attemptLogAppend(db, ref, [{ message: 'x' }])).toEqual({ stored: 0, dropped: 1 });
    const view = await attemptLogsGet(db, task.id, { limit: 5 });
    expect(view.attempt).toMatchObject({ lines: LIMITS.logLinesPerAttempt, dropped: 1400 - LIMITS.logLinesPerAttempt + 1 });
    expect(view.attempt!.entries.map((l) => l.message)).toEqual(['line 0', 'line 1', 'line 2', 'line 3', 'line 4']);
  });

  it('bytes: a long message is cut and says so; lines past the bytes allowance are dropped', async () => {
    const { task, ref } = await held();
    const long = 'y'.repeat(LIMITS.logLineChars * 3);
    const r = await attemptLogAppend(db, ref, Array.from({ length: 100 }, () => ({ message: long })));
    const perLine = Buffer.byteLength(`${'y'.repeat(LIMITS.logLineChars)}… (cut: ${long.length} characters)`);
    expect(r.stored).toBe(Math.floor(LIMITS.logBytesPerAttempt / perLine));
    expect(r.dropped).toBe(100 - r.stored);
    const [line] = (await attemptLogsGet(db, task.id, { limit: 1 })).attempt!.entries;
    expect(line!.message.endsWith(`… (cut: ${long.length} characters)`)).toBe(true);
    const [stats] = await rowsOf<{ bytes: number }>(db, sql`select bytes from attempt_log_stats`);
    expect(stats!.bytes).toBeLessThanOrEqual(LIMITS.logBytesPerAttempt);
  });

  it('what PostgreSQL cannot store, or an agent\'s clock, changes nothing else', async () => {
    const { task, ref } = await held();
    const deep: Record<string, unknown> = {};
    let at = deep;
    for (let i = 0; i < 100; i++) at = (at.x = {}) as Record<string, unknown>;
    await attemptLogAppend(db, ref, [
      { message: 'nul \u0000 and \ud800 lone', fields: { s: 'also \u0000' } },
      { message: 'deep', fields: deep },
      { message: 'big fields', fields: { blob: 'z'.repeat(LIMITS.logLineChars * 2) } },
      { message: 'from the future', at: '2099-01-01T00:00:00Z' },
      { message: 'from the past', at: 0 },
    ]);
    const lines = (await attemptLogsGet(db, task.id)).attempt!.entries;
    expect(lines[0]).toMatchObject({ message: 'nul \uFFFD and \uFFFD lone', fields: { s: 'also \uFFFD' } });
    expect(lines[1]!.fields).toEqual({ _dropped: 'the fields could not be stored as JSON' });
    expect(lines[2]!.fields!._dropped).toMatch(/^the fields were \d+ characters as JSON; at most 4096$/);
    const [bounds] = await rowsOf<{ claimed: string; now: string }>(db, sql`select claimed_at::text as claimed, now()::text as now from tasks where id = ${task.id}`);
    expect(new Date(lines[3]!.at).getTime()).toBeLessThanOrEqual(new Date(bounds!.now).getTime());
    expect(new Date(lines[4]!.at).getTime()).toBe(new Date(bounds!.claimed).getTime());
  });

  it('two connections appending to one attempt at once never keep more than its allowance', async () => {
    const { task, ref } = await held();
    const other = await databaseOpen({ url: database.url, migrate: false, poolSize: 8 });
    try {
      const batch = Array.from({ length: 300 }, (_, i) => ({ message: `m${i}` }));
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => attemptLogAppend(i % 2 ? other.db : db, ref, batch)));
      expect(results.reduce((n, r) => n + r.stored, 0)).toBe(LIMITS.logLinesPerAttempt);
      expect(results.reduce((n, r) => n + r.dropped, 0)).toBe(2400 - LIMITS.logLinesPerAttempt);
    } finally {
      await other.close();
    }
    const [n] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from attempt_logs where task_id = ${task.id}`);
    expect(n!.n).toBe(LIMITS.logLinesPerAttempt);
  });

  it('a completed task\'s log stays readable; a task that never logged has none', async () => {
    const { task, ref } = await held();
    await attemptLogAppend(db, ref, [{ message: 'done soon' }]);
    await taskComplete(db, { ...ref, output: { ok: true } });
    expect((await attemptLogsGet(db, task.id)).attempt).toMatchObject({ running: false, lines: 1 });
    const { task: quiet } = await held();
    expect(await attemptLogsGet(db, quiet.id)).toEqual({ attempts: [] });
    await expect(attemptLogsGet(db, 'task_nope')).rejects.toThrow(/task task_nope not found/);
  });
});
