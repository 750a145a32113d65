import { describe, expect, it } from 'vitest';
import { cliWith } from '../helpers/cli.js';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { streamWrite } from '../../src/engine/attempt/streams.js';
import { EXIT } from '../../src/errors.js';

// dagent stream: a task's stream printed as it is written, until it ends; an agent's text never reaches the
// operator's terminal as a control sequence.
const database = await testDatabase();
const { db } = database;
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });

async function held(key: string) {
  await agentCreate(db, 'a1', ['gen']);
  await dagCreate(db, `name: ${key}\ntasks:\n  t: { type: t, spec: { constraints: { capabilities: [gen] } } }\n`);
  const [t] = await taskClaim(db, 'a1', { start: true });
  return { taskId: t!.id, fence: t!.fence };
}

describe('dagent stream', () => {
  it('prints the stream live until it ends; control characters shown as escapes, line breaks kept', async () => {
    const ref = await held('live');
    const following = cli('stream', ref.taskId);
    await streamWrite(db, ref, { name: 'output', fromSeq: 1, chunks: [{ kind: 'text', data: 'line one\nline two ' }, { kind: 'text', data: '\u001b]0;pwned\u0007\u001b[2J' }] });
    await new Promise((r) => setTimeout(r, 300));
    await streamWrite(db, ref, { name: 'output', fromSeq: 3, chunks: [{ kind: 'json', data: '{"done":true}' }], end: true });
    const r = await following;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('line one\nline two \\x1b]0;pwned\\x07\\x1b[2J\n{"done":true}\n(stream output of attempt 1 ended)\n');
    expect(r.stdout).not.toContain('\u001b');
  });

  it('--from and --json; a stream that ends with its failed attempt; unknown task or stream is a clear error', async () => {
    const ref = await held('json');
    await streamWrite(db, ref, { name: 'notes', fromSeq: 1, chunks: ['a', 'b', 'c'].map((data) => ({ kind: 'text' as const, data })) });
    await taskFail(db, { ...ref, errorClass: 'crash', message: 'killed' });
    const r = await cli('stream', ref.taskId, 'notes', '--from', '1', '--json');
    expect(r.stdout.trim().split('\n').map((l) => JSON.parse(l))).toEqual([
      { seq: 2, text: 'b' }, { seq: 3, text: 'c' }, { end: { reason: 'attempt_ended', outcome: 'failed', chunks: 3 } },
    ]);
    const missing = await cli('stream', ref.taskId, 'nothing');
    expect([missing.code, missing.stderr]).toEqual([EXIT.notFound, expect.stringContaining('stream')]);
    const bad = await cli('stream', ref.taskId, '--from', '-2');
    expect([bad.code, bad.stderr]).toEqual([EXIT.invalidInput, expect.stringContaining('--from must be a whole number')]);
  });
});
