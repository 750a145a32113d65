import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { taskClaim, type ClaimedTask } from '../../src/engine/attempt/claim.js';
import { taskComplete, taskCompleteMany } from '../../src/engine/attempt/complete.js';
import { taskSpawn } from '../../src/engine/dag/spawn.js';
import { taskCompleteMark } from '../../src/db/queries/tasks-complete.js';

const { db } = await testDatabase();

// Invalid schemas, schema files and patterns are refused at submission with file:line:col:
// test/fixtures/bad/56–60, run through the loader and `dagent submit` by test/dag/bad-files.test.ts.

const REPORT = `
name: report
tasks:
  write:
    type: llm
    max_attempts: 3
    output:
      type: json
      validation:
        - kind: json-schema
          schema:
            type: object
            required: [summary, tests]
            properties:
              summary: { type: string, minLength: 1 }
              tests: { type: integer, minimum: 0 }
              url: { type: string, format: uri }
        - { kind: regex, field: summary, pattern: "^[A-Z]" }
  publish:
    type: shell
    depends_on: [write]
    spec: { context: [write.summary] }
`;

async function claimOne(agentId: string, key: string): Promise<ClaimedTask> {
  const [t] = await taskClaim(db, agentId, { limit: 1 });
  expect(t?.key).toBe(key);
  return t!;
}

interface AttemptRow { outcome: string; error_class: string | null; error_message: string | null; details: { verdicts?: Array<{ kind: string; pass: boolean; reasons: string[] }> } | null }
const attemptsOf = (taskId: string) => rowsOf<AttemptRow>(db, sql`select outcome, error_class, error_message, details from attempts where task_id = ${taskId} order by fence`);

describe('inline validation steps (json-schema, regex)', () => {
  it('completes a task whose output passes every step, and unblocks its dependents', async () => {
    const dagId = await dagCreate(db, REPORT);
    await agentCreate(db, 'inline-pass');
    const t = await claimOne('inline-pass', 'write');
    const r = await taskComplete(db, { taskId: t.id, fence: t.fence, output: { summary: 'All good', tests: 12, url: 'https://example.com/r/1' } });
    expect(r.settled).toMatchObject({ status: 'completed', unblocked: 1 });
    expect(await taskStatusByKey(db, dagId)).toEqual({ write: 'completed', publish: 'ready' });
    const publish = await claimOne('inline-pass', 'publish');
    expect(publish.inputs).toEqual({ 'write.summary': 'All good' });
    const [attempt] = await attemptsOf(t.id);
    expect(attempt!.outcome).toBe('completed');
    expect(attempt!.details!.verdicts!.map((v) => [v.kind, v.pass])).toEqual([['json-schema', true], ['regex', true]]);
  });

  it('fails a schema violation as invalid_output, listing every violation with its JSON pointer, and retries', async () => {
    const dagId = await dagCreate(db, REPORT);
    await agentCreate(db, 'inline-fail');
    const t = await claimOne('inline-fail', 'write');
    const r = await taskComplete(db, { taskId: t.id, fence: t.fence, output: { summary: '', url: 'not a uri' } });
    expect(r.settled?.status).toBe('rejected');
    expect(await taskStatusByKey(db, dagId)).toMatchObject({ write: 'retrying', publish: 'pending' });
    const [attempt] = await attemptsOf(t.id);
    expect(attempt).toMatchObject({ outcome: 'failed', error_class: 'invalid_output' });
    expect(attempt!.error_message).toContain("/ must have required property 'tests'");
    expect(attempt!.error_message).toContain('/summary must NOT have fewer than 1 characters');
    expect(attempt!.error_message).toContain('/url must match format "uri"');
    // The regex step never ran: the first failing step decides.
    expect(attempt!.details!.verdicts!.map((v) => v.kind)).toEqual(['json-schema']);
    const [task] = await rowsOf<{ output: unknown; attempts: number }>(db, sql`select output, attempts from tasks where id = ${t.id}`);
    expect(task).toEqual({ output: null, attempts: 1 });
  });

  it('checks a regex against one field of the output', async () => {
    const dagId = await dagCreate(db, REPORT);
    await agentCreate(db, 'inline-regex');
    const t = await claimOne('inline-regex', 'write');
    await taskComplete(db, { taskId: t.id, fence: t.fence, output: { summary: 'lowercase start', tests: 1 } });
    const [attempt] = await attemptsOf(t.id);
    expect(attempt!.error_message).toMatch(/^regex step 2 rejected the output: field summary does not match \/\^\[A-Z\]\/: "lowercase start"/);
    expect(await taskStatusByKey(db, dagId)).toMatchObject({ write: 'retrying' });
  });

  it('refuses a text regex on a JSON output without a field, and checks plain text outputs', async () => {
    await dagCreate(db, `
name: text-check
tasks:
  ver: { type: t, output: { validation: { kind: regex, pattern: "^v\\\\d+\\\\.\\\\d+$" } } }
  obj: { type: t, output: { validation: { kind: regex, pattern: "x" } } }
`);
    await agentCreate(db, 'inline-text');
    const claimed = await taskClaim(db, 'inline-text', { limit: 2 });
    const ver = claimed.find((t) => t.key === 'ver')!;
    const obj = claimed.find((t) => t.key === 'obj')!;
    expect((await taskComplete(db, { taskId: ver.id, fence: ver.fence, output: 'v1.2' })).settled?.status).toBe('completed');
    const r = await taskComplete(db, { taskId: obj.id, fence: obj.fence, output: { x: 1 } });
    expect(r.settled).toMatchObject({ status: 'rejected', verdict: { reasons: ['the output is an object, not text (name a field)'] } });
  });

  it('cannot be bypassed: the plain completion statement refuses a task that declares validation', async () => {
    const dagId = await dagCreate(db, REPORT);
    await agentCreate(db, 'inline-bypass');
    const t = await claimOne('inline-bypass', 'write');
    const r = await taskCompleteMark(db, [{ id: t.id, fence: t.fence, output: { anything: true } }]);
    expect(r.completed).toEqual([]);
    expect(await taskStatusByKey(db, dagId)).toMatchObject({ write: 'claimed' });
  });

  it('settles validated items of a batch one by one, beside the plain ones', async () => {
    const dagId = await dagCreate(db, `
name: mixed
tasks:
  plain: { type: t }
  checked: { type: t, output: { validation: { kind: json-schema, schema: { type: array } } } }
`);
    await agentCreate(db, 'inline-batch');
    const claimed = await taskClaim(db, 'inline-batch', { limit: 2 });
    const r = await taskCompleteMany(db, claimed.map((t) => ({ taskId: t.id, fence: t.fence, output: { not: 'an array' } })));
    expect(r.completed).toEqual([claimed.find((t) => t.key === 'plain')!.id]);
    expect(r.refused).toEqual([]);
    expect([...r.settled.values()].map((s) => s.status)).toEqual(['rejected']);
    expect(await taskStatusByKey(db, dagId)).toEqual({ plain: 'completed', checked: 'retrying' });
  });

  it('applies to subtasks spawned from a template; an agent writing its own steps is refused and nothing is written', async () => {
    const dagId = await dagCreate(db, `name: parent
spawn:
  templates:
    str: { type: t, output: { validation: { kind: json-schema, schema: { type: string } } } }
tasks:
  root: { type: t }
`);
    await agentCreate(db, 'inline-spawn');
    const root = await claimOne('inline-spawn', 'root');
    const own = [{ key: 'c', type: 't', output: { validation: [{ kind: 'json-schema', schema: { type: 'string' } }] } }];
    await expect(taskSpawn(db, { taskId: root.id, fence: root.fence }, own))
      .rejects.toThrow(/^subtasks\[0\]\.output\.validation: an agent cannot say how its work is validated/);
    expect(Object.keys(await taskStatusByKey(db, dagId))).toEqual(['root']);
    await taskSpawn(db, { taskId: root.id, fence: root.fence }, [{ key: 'c', template: 'str' }]);
    const child = await claimOne('inline-spawn', 'root/c');
    const r = await taskComplete(db, { taskId: child.id, fence: child.fence, output: 42 });
    expect(r.settled).toMatchObject({ status: 'rejected', verdict: { reasons: ['/ must be string'] } });
  });
});
