import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { attemptLogAppend } from '../../src/engine/read/attempt-logs.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { cliWith } from '../helpers/cli.js';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { agentCreate, dagCreate, databaseReset, databaseSnapshot, rowsOf } from '../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
beforeEach(() => databaseReset(db));
/** An instant as every answer and `--json` sends it (Date.toISOString). */
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

async function heldBy(agentId: string) {
  await dagCreate(db, 'name: logs\ntasks:\n  work: { type: w, max_attempts: 1 }\n');
  await agentCreate(db, agentId);
  const [t] = await taskClaim(db, agentId, { start: true });
  return t!;
}

describe('per-attempt logs over HTTP', () => {
  it('the holding agent appends; another agent, a stale fence or a malformed body changes nothing; a reader reads', async () => {
    const t = await heldBy('w1');
    const mine = await http.agentToken('w1');
    await agentCreate(db, 'w2');
    const theirs = await http.agentToken('w2');
    const url = `/api/tasks/${t.id}/logs`;
    const ok = await http.call('POST', url, { token: mine, body: { fence: t.fence, lines: [{ level: 'warn', message: 'slow', fields: { ms: 900 } }, { message: 'done' }] } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body).toEqual({ stored: 2, dropped: 0 });

    const before = await databaseSnapshot(db);
    const refused = [
      [await http.call('POST', url, { token: theirs, body: { fence: t.fence, lines: [{ message: 'not mine' }] } }), 403],
      [await http.call('POST', url, { token: mine, body: { fence: t.fence + 1, lines: [{ message: 'stale' }] } }), 409],
      [await http.call('POST', url, { token: mine, body: { fence: t.fence, lines: [] } }), 400],
      [await http.call('POST', url, { token: mine, body: { fence: t.fence, lines: [{ level: 'loud', message: 'x' }] } }), 400],
      [await http.call('POST', url, { token: mine, body: { fence: t.fence, lines: Array.from({ length: 501 }, () => ({ message: 'x' })) } }), 400],
      [await http.call('POST', '/api/tasks/tsk_nope/logs', { token: mine, body: { fence: 1, lines: [{ message: 'x' }] } }), 404],
    ] as const;
    for (const [r, status] of refused) expect(r.status, JSON.stringify(r.body)).toBe(status);
    expect(refused[2]![0].body.error.message).toMatch(/body\.lines/);
    expect(await databaseSnapshot(db)).toEqual(before);

    const { token: read } = await tokenCreate(db, { role: 'read', name: 'viewer' });
    const got = await http.call('GET', url, { token: read });
    expect(got.status).toBe(200);
    expect(got.body.attempt).toMatchObject({ attempt: 1, running: true, lines: 2, entries: [{ level: 'warn', message: 'slow', fields: { ms: 900 } }, { level: 'info', message: 'done' }] });
    expect(got.body.attempt.entries.map((l: { at: string }) => l.at)).toEqual([expect.stringMatching(ISO), expect.stringMatching(ISO)]);
    const page = await http.call('GET', `${url}?after=${got.body.attempt.entries[0].id}`, { token: read });
    expect(page.body.attempt.entries.map((l: { message: string }) => l.message)).toEqual(['done']);
    expect((await http.call('GET', `${url}?attempt=0`, { token: read })).status).toBe(400);
    expect((await http.call('POST', url, { token: read, body: { fence: t.fence, lines: [{ message: 'x' }] } })).status).toBe(403);
  });
});

describe('dagent logs', () => {
  it('prints an attempt\'s lines, picks an attempt, says what was dropped, and dlq show ends with the log', async () => {
    const t = await heldBy('w1');
    await attemptLogAppend(db, { taskId: t.id, fence: t.fence }, [
      { level: 'info', message: 'cloning', fields: { repo: 'api' } },
      { level: 'error', message: 'tests failed' },
      ...Array.from({ length: 1_005 }, (_, i) => ({ message: `noise ${i}` })),
    ]);
    const failed = await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'crash', message: 'boom' });
    expect(failed.status).toBe('dead_lettered');

    const out = await cli('logs', t.id);
    expect(out.code, out.stderr).toBe(0);
    const lines = out.stdout.split('\n');
    expect(lines[0]).toBe('attempt 1: 1000 line(s)');
    expect(lines[1]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  cloning \{"repo":"api"\}$/);
    expect(lines[2]).toMatch(/ ERROR tests failed$/);
    expect(out.stdout).toContain('(7 more line(s) dropped: an attempt keeps 1000 lines and 262144 bytes of log)');
    const json = await cli('logs', t.id, '--attempt', '1', '--json');
    expect(json.json().attempt).toMatchObject({ attempt: 1, lines: 1000, dropped: 7, running: false });
    expect(json.json().attempt.entries[0]).toMatchObject({ message: 'cloning', at: expect.stringMatching(ISO) });
    expect((await cli('logs', t.id, '--attempt', '2')).stderr).toMatch(/log of attempt 2 of task .* not found/);
    expect((await cli('logs', t.id, '--attempt', 'x')).code).toBe(2);

    const show = await cli('dlq', 'show', (failed as { deadLetterId: string }).deadLetterId);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toContain(`log of attempt 1 (its last 20 of 1000 lines: dagent logs ${t.id} --attempt 1):`);
    expect(show.stdout).toMatch(/INFO  noise 997\n/);
    expect(show.stdout).toContain('(7 more line(s) dropped');
    // As JSON, the history's instants (kept in the entry's stored JSON) and the log's are ISO 8601, like every instant.
    const shown = (await cli('dlq', 'show', (failed as { deadLetterId: string }).deadLetterId, '--json')).json();
    expect(shown.entry.history).toEqual([expect.objectContaining({ attempt: 1, started_at: expect.stringMatching(ISO), ended_at: expect.stringMatching(ISO) })]);
    expect(shown.log.entries.at(-1)).toMatchObject({ message: 'noise 997', at: expect.stringMatching(ISO) });
  });

  it('--follow prints lines as they come and stops when the attempt ends', async () => {
    const t = await heldBy('w1');
    const ref = { taskId: t.id, fence: t.fence };
    await attemptLogAppend(db, ref, [{ message: 'first' }]);
    const following = cli('logs', t.id, '--follow');
    await new Promise((r) => setTimeout(r, 700));
    await attemptLogAppend(db, ref, [{ message: 'second' }]);
    await new Promise((r) => setTimeout(r, 700));
    await attemptLogAppend(db, ref, [{ level: 'warn', message: 'third' }]);
    await taskComplete(db, { ...ref, output: { ok: true } });
    const out = await following;
    expect(out.code, out.stderr).toBe(0);
    const messages = out.stdout.trim().split('\n').map((l) => l.replace(/^\d\d:\d\d:\d\d\.\d{3} [A-Z]+\s+/, ''));
    expect(messages).toEqual(['first', 'second', 'third', '(attempt 1 ended)']);
  });

  it('--follow on a task that logged nothing and is done says so', async () => {
    const t = await heldBy('w1');
    await taskComplete(db, { taskId: t.id, fence: t.fence, output: 1 });
    const out = await cli('logs', t.id, '--follow');
    expect(out.stdout).toBe(`(task ${t.id} is completed; it logged nothing)\n`);
    expect(await rowsOf(db, sql`select 1 from attempt_logs`)).toEqual([]);
  });
});
