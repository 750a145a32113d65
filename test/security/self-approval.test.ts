import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { rowsOf } from '../helpers/factories.js';
import { httpAgent } from './helpers/agent.js';
import { refused, serverStart } from './helpers/server.js';

// Finding 3 (second half): an agent could claim the validation task of its own output, and a
// verdict could come from an agent that did not hold the validation task. No validation agent
// runs in this server: the validators are the test's own HTTP agents, so who holds what is known.
const database = await testDatabase();
const { db } = database;
const server = await serverStart(database);

const submit = (yaml: string) => server.submit(yaml);


describe('no agent approves its own output', () => {
  const JUDGED = (name: string) => `name: ${name}\ntasks:\n  essay: { type: w, spec: { constraints: { capabilities: [work] } }, output: { validation: { kind: test, command: "true" } } }\n`;

  it('a validation task is never claimed by the agent whose output it judges, even one granted that validator capability', async () => {
    const dagId = await submit(JUDGED('self-approval'));
    const both = await httpAgent(server, db, 'writer-and-tester', { capabilities: ['work'], validators: ['test'] });
    const [essay] = await both.claim(dagId);
    const done = await both.complete(essay!, 'my essay');
    expect(done.body.settled.status).toBe('validating');
    expect(await both.claim(dagId)).toEqual([]);
    const [vt] = await rowsOf<{ status: string; validates_agent: string }>(db, sql`select status, validates_agent from tasks where dag_id = ${dagId} and validates_id is not null`);
    expect(vt!.validates_agent).toBe('writer-and-tester');
    // Another validator takes it.
    const other = await httpAgent(server, db, 'other-tester', { validators: ['test'] });
    const [taken] = await other.claim(dagId);
    expect(taken?.key).toBe('essay/validate-1@1');
    expect((await other.complete(taken!, { pass: true })).body.settled.status).toBe('completed');
  });

  it('a verdict comes only from the holder of the validation task, under its fence', async () => {
    const dagId = await submit(JUDGED('verdict-holder'));
    const writer = await httpAgent(server, db, 'essayist', { capabilities: ['work'] });
    const [essay] = await writer.claim(dagId);
    await writer.complete(essay!, 'an essay');
    const v1 = await httpAgent(server, db, 'validator-1', { validators: ['test'] });
    const v2 = await httpAgent(server, db, 'validator-2', { validators: ['test'] });
    const [held] = await v1.claim(dagId);
    expect(held).toBeDefined();
    const state = () => rowsOf<{ key: string; status: string; fence: number; claimed_by: string | null; output: unknown }>(db, sql`
      select key, status, fence, claimed_by, output from tasks where dag_id = ${dagId} order by key`);
    const attempts = () => rowsOf<{ n: number }>(db, sql`select count(*)::int as n from attempts where dag_id = ${dagId}`);
    const [before, attemptsBefore] = [await state(), await attempts()];
    const pass = { pass: true, reasons: ['looks fine to me'] };
    await refused(403, 'FORBIDDEN', v2.complete(held!, pass), /not held by agent validator-2/);
    await refused(403, 'FORBIDDEN', writer.complete(held!, pass), /not held by agent essayist/);
    expect(await state()).toEqual(before);
    expect(await attempts()).toEqual(attemptsBefore);
    expect((await v1.complete(held!, pass)).body.settled.status).toBe('completed');
  });
});
