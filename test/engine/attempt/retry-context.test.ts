import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { taskFail } from '../../../src/engine/attempt/fail.js';
import { promoterCreate } from '../../../src/maintenance/promoter.js';
import { llmMessages } from '../../../agents/llm.js';
import { testDatabase } from '../../helpers/db.js';
import { testHttp } from '../../helpers/http.js';
import { agentCreate, dagCreate, databaseReset, retryDue, rowsOf } from '../../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const promoter = promoterCreate({ db });
beforeEach(() => databaseReset(db));

const DAG = `
name: learns
tasks:
  essay:
    type: llm
    max_attempts: 5
    spec: { prompt: Write a title }
    output: { validation: { kind: json-schema, schema: { type: object, required: [title], properties: { title: { type: string, maxLength: 10 } } } } }
`;

async function claimAgain(agentId: string) {
  const [t] = await taskClaim(db, agentId);
  if (t) return t;
  // The retry's backoff, elapsed.
  for (const r of await rowsOf<{ id: string }>(db, sql`select id from tasks where status = 'retrying'`)) await retryDue(db, r.id);
  await promoter.runOnce();
  return (await taskClaim(db, agentId))[0]!;
}

describe('retries that learn', () => {
  it('a retry carries the earlier attempts: the error, the output validation rejected and each verdict with its reasons', async () => {
    await dagCreate(db, DAG);
    await agentCreate(db, 'writer');
    const first = (await taskClaim(db, 'writer'))[0]!;
    expect(first.previousAttempts).toEqual([]);
    const rejected = await taskComplete(db, { taskId: first.id, fence: first.fence, output: { title: 'Far too long a title' } });
    expect(rejected.settled).toMatchObject({ status: 'rejected' });

    const second = await claimAgain('writer');
    expect(second.attempt).toBe(2);
    expect(second.previousAttempts).toEqual([{
      attempt: 1, agentId: 'writer', model: null, errorClass: 'invalid_output', errorMessage: expect.stringContaining('json-schema step 1 rejected the output'),
      rejectedOutput: { title: 'Far too long a title' },
      verdicts: [expect.objectContaining({ kind: 'json-schema', pass: false, reasons: [expect.stringContaining('/title')] })],
      endedAt: expect.any(Date),
    }]);

    // A failure the agent reports is there too, with its class and message, and no output.
    await taskFail(db, { taskId: second.id, fence: second.fence, errorClass: 'provider_error', message: 'provider answered 502', model: 'gpt-4o' });
    const third = await claimAgain('writer');
    expect(third.previousAttempts.map((p) => [p.attempt, p.errorClass, p.model, 'rejectedOutput' in p])).toEqual([
      [1, 'invalid_output', null, true], [2, 'provider_error', 'gpt-4o', false],
    ]);

    // The llm agent puts what was wrong with the answer in front of the model; the provider's failure says nothing
    // to the model and is left out, so the prompt after it is the same and its recorded model calls replay.
    const [, user] = llmMessages(third);
    expect(user!.content).toContain('Earlier attempts at this task failed');
    expect(user!.content).toContain('attempt 1: invalid_output: json-schema step 1 rejected the output');
    expect(user!.content).toContain('that answer was: {"title":"Far too long a title"}');
    expect(user!.content).not.toContain('provider answered 502');
    expect(llmMessages(third)).toEqual(llmMessages({ ...third, previousAttempts: third.previousAttempts.slice(0, 1) }));
  });

  it('hands back at most the latest three failed attempts', async () => {
    await dagCreate(db, DAG);
    await agentCreate(db, 'writer');
    let t = (await taskClaim(db, 'writer'))[0]!;
    for (let i = 1; i <= 4; i++) {
      await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'transient', message: `try ${i}` });
      t = await claimAgain('writer');
    }
    expect(t.attempt).toBe(5);
    expect(t.previousAttempts.map((p) => p.errorMessage)).toEqual(['try 2', 'try 3', 'try 4']);
  });

  it('an HTTP agent reads when each earlier attempt ended as ISO 8601, like every instant', async () => {
    await dagCreate(db, DAG);
    await agentCreate(db, 'writer');
    const first = (await taskClaim(db, 'writer'))[0]!;
    await taskFail(db, { taskId: first.id, fence: first.fence, errorClass: 'transient', message: 'try 1' });
    for (const r of await rowsOf<{ id: string }>(db, sql`select id from tasks where status = 'retrying'`)) await retryDue(db, r.id);
    await promoter.runOnce();
    const claimed = await http.call('POST', '/api/agents/writer/claim', { token: await http.agentToken('writer'), body: {} });
    expect(claimed.status).toBe(200);
    expect(claimed.body.tasks[0].previousAttempts).toEqual([
      expect.objectContaining({ attempt: 1, errorMessage: 'try 1', endedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) }),
    ]);
  });
});
