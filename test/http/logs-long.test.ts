import { beforeEach, describe, expect, it, vi } from 'vitest';

// An operator who lets an attempt keep more lines than one read returns (LOG_READ_PAGE_LINES): read before any
// module reads the limits, which each process reads once.
vi.hoisted(() => { process.env.DAGENT_LIMIT_LOG_LINES_PER_ATTEMPT = '2500'; });

const { taskClaim } = await import('../../src/engine/attempt/claim.js');
const { taskFail } = await import('../../src/engine/attempt/fail.js');
const { attemptLogAppend, LOG_READ_PAGE_LINES } = await import('../../src/engine/read/attempt-logs.js');
const { LIMITS } = await import('../../src/config/index.js');
const { cliWith } = await import('../helpers/cli.js');
const { testDatabase } = await import('../helpers/db.js');
const { agentCreate, dagCreate, databaseReset } = await import('../helpers/factories.js');

const database = await testDatabase();
const { db } = database;
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
beforeEach(() => databaseReset(db));

describe('an attempt that keeps more lines than one read returns', () => {
  it('dagent logs prints every line it kept, and dlq show its last 20', async () => {
    expect(LIMITS.logLinesPerAttempt).toBe(2500);
    const lines = LOG_READ_PAGE_LINES * 2 + 300;
    await dagCreate(db, 'name: long-log\ntasks:\n  work: { type: w, max_attempts: 1 }\n');
    await agentCreate(db, 'w1');
    const [t] = await taskClaim(db, 'w1', { start: true });
    for (let from = 0; from < lines; from += 500) {
      await attemptLogAppend(db, { taskId: t!.id, fence: t!.fence },
        Array.from({ length: Math.min(500, lines - from) }, (_, i) => ({ message: `line ${from + i + 1}` })));
    }
    const failed = await taskFail(db, { taskId: t!.id, fence: t!.fence, errorClass: 'crash', message: 'boom' });

    const out = await cli('logs', t!.id);
    expect(out.code, out.stderr).toBe(0);
    const printed = out.stdout.split('\n').filter((l) => / line \d+$/.test(l)).map((l) => Number(l.split(' ').at(-1)));
    expect(printed).toEqual(Array.from({ length: lines }, (_, i) => i + 1));
    expect(out.stdout).not.toContain('dropped');

    const show = await cli('dlq', 'show', (failed as { deadLetterId: string }).deadLetterId);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toContain(`log of attempt 1 (its last 20 of ${lines} lines: dagent logs ${t!.id} --attempt 1):`);
    const tail = show.stdout.split('\n').filter((l) => / line \d+$/.test(l)).map((l) => Number(l.split(' ').at(-1)));
    expect(tail).toEqual(Array.from({ length: 20 }, (_, i) => lines - 19 + i));
  });
});
