import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { dagCreate, databaseReset, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import validateTest from '../../agents/validate-test.js';

const database = await testDatabase();
const { db } = database;
const { run } = agentRunners(database, { pollIntervalMs: 200 });

beforeEach(() => databaseReset(db));

/** Returns the output its task's input names: the agent under validation. */
const writer = defineAgent({ name: 'writer', capabilities: ['write'], maxConcurrent: 4, run: async (task) => task.spec.input.output });

// A check script a DAG would ship: passes when the JSON output says ok.
const CHECK = `node -e "const o = JSON.parse(require('fs').readFileSync(process.env.DAGENT_OUTPUT_FILE, 'utf8')); if (!o.ok) { console.error(o.failures + ' tests failed'); process.exit(1) }"`;

function dagYaml(output: unknown, step: string): string {
  return `
name: build
tasks:
  build:
    type: code
    spec: { constraints: { capabilities: [write] }, input: { output: ${JSON.stringify(output)} } }
    output:
      validation:
        - { kind: json-schema, schema: { type: object, required: [ok] } }
        - ${step}
  ship:
    type: deploy
    depends_on: [build]
    spec: { constraints: { capabilities: [write] }, input: { output: shipped } }
`;
}

interface Attempt { outcome: string; error_class: string | null; error_message: string | null; details: { verdicts: Array<Record<string, unknown>> } | null }
const attemptsOf = (dagId: string, key: string) => rowsOf<Attempt>(db, sql`
  select a.outcome, a.error_class, a.error_message, a.details from attempts a join tasks t on t.id = a.task_id
  where t.dag_id = ${dagId} and t.key = ${key} order by a.fence`);
const statusOf = async (dagId: string, key: string) => (await taskStatusByKey(db, dagId))[key];

describe('test validation steps, run as validation tasks', () => {
  it('exit 0 completes the task (after VALIDATING) and unblocks its dependents', async () => {
    const dagId = await dagCreate(db, dagYaml({ ok: true }, `{ kind: test, command: ${JSON.stringify(CHECK)}, timeout: 30s }`));
    await run(writer, { id: 'writer-1' });
    await eventually('build validating', async () => (await statusOf(dagId, 'build')) === 'validating');
    await run(validateTest, { id: 'validator-1' });
    await eventually('DAG completed', async () => (await taskStatusByKey(db, dagId)).ship === 'completed');

    const [attempt, ...more] = await attemptsOf(dagId, 'build');
    expect(more).toEqual([]);
    expect(attempt!.outcome).toBe('completed');
    expect(attempt!.details!.verdicts.map((v) => [v.kind, v.pass])).toEqual([['json-schema', true], ['test', true]]);
    expect(attempt!.details!.verdicts[1]).toMatchObject({ exit_code: 0 });
    const [vt] = await rowsOf<{ type: string; status: string; claimed_by: string; required_capabilities: string[] }>(db, sql`
      select type, status, claimed_by, required_capabilities from tasks where dag_id = ${dagId} and validates_id is not null`);
    expect(vt).toEqual({ type: 'validate:test', status: 'completed', claimed_by: 'validator-1', required_capabilities: ['validate:test'] });
  });

  it('exit 1 fails the task as invalid_output, with the output tail in the attempt, and the task retries', async () => {
    const dagId = await dagCreate(db, dagYaml({ ok: false, failures: 3 }, `{ kind: test, command: ${JSON.stringify(CHECK)} }`));
    await run(writer, { id: 'writer-2' });
    await run(validateTest, { id: 'validator-2' });
    await eventually('build retrying', async () => (await statusOf(dagId, 'build')) === 'retrying');
    const [attempt] = await attemptsOf(dagId, 'build');
    expect(attempt).toMatchObject({ outcome: 'failed', error_class: 'invalid_output' });
    expect(attempt!.error_message).toContain('test step 2 rejected the output: exit 1');
    expect(attempt!.error_message).toContain('3 tests failed');
    expect(attempt!.details!.verdicts[1]).toMatchObject({ kind: 'test', pass: false, exit_code: 1, stderr_tail: '3 tests failed' });
    expect(await statusOf(dagId, 'ship')).toBe('pending');
  });

  it('a test that runs past its timeout is a negative verdict of class timeout', async () => {
    const dagId = await dagCreate(db, dagYaml({ ok: true }, `{ kind: test, command: "echo started; sleep 30", timeout: 500ms }`));
    await run(writer, { id: 'writer-3' });
    await run(validateTest, { id: 'validator-3' });
    await eventually('build retrying', async () => (await statusOf(dagId, 'build')) === 'retrying');
    const [attempt] = await attemptsOf(dagId, 'build');
    expect(attempt).toMatchObject({ outcome: 'failed', error_class: 'timeout' });
    expect(attempt!.error_message).toContain('timed out after 0.5s');
    expect(attempt!.details!.verdicts[1]).toMatchObject({ pass: false, error_class: 'timeout', stdout_tail: 'started' });
  });

  it('the test command sees the output file, the step\'s env and the DAG file\'s directory, not dagent\'s settings', async () => {
    const probe = `node -e "const fs = require('fs'); console.log(JSON.stringify({ out: fs.readFileSync(process.env.DAGENT_OUTPUT_FILE, 'utf8'), mode: process.env.MODE, db: process.env.DATABASE_URL ?? null, cwd: process.cwd() }))"`;
    const dagId = await dagCreate(db, dagYaml({ ok: true }, `{ kind: test, command: ${JSON.stringify(probe)}, env: { MODE: strict } }`));
    await run(writer, { id: 'writer-4' });
    await run(validateTest, { id: 'validator-4' });
    await eventually('build completed', async () => (await statusOf(dagId, 'build')) === 'completed');
    const [attempt] = await attemptsOf(dagId, 'build');
    const seen = JSON.parse(attempt!.details!.verdicts[1]!.stdout_tail as string);
    expect(seen).toEqual({ out: JSON.stringify({ ok: true }, null, 2), mode: 'strict', db: null, cwd: process.cwd() });
  });
});
