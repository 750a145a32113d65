import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { databaseSnapshot } from '../helpers/factories.js';
import { agentCreate, dagCreate } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { InvalidInputError } from '../../src/errors.js';
import { jsonStorable } from '../../src/runtime/task-run.js';
import { innocentBystander } from './helpers/innocent.js';
import { refused, serverStart } from './helpers/server.js';
import { CLI_COMPILED } from '../helpers/cli.js';

// Finding 6: ~100 kB of YAML expanded through ${params} to ~50 MB of spec (and GBs of RSS).
// Every size now has a cap and a clear error; each cap can be changed with DAGENT_LIMIT_<NAME>.
const database = await testDatabase();
const server = await serverStart(database);

async function refusedUnchanged(yaml: string, why: RegExp) {
  const before = await databaseSnapshot(database.db);
  await refused(400, 'DAG_INVALID', server.call('POST', '/api/dags', { raw: yaml, contentType: 'application/yaml' }), why);
  expect(await databaseSnapshot(database.db)).toBe(before);
}

describe('caps on what a DAG may expand to', () => {
  it('a 100 kB param used 600 times is refused once the expansion passes 4 Mi characters; an innocent DAG beside it completes', async () => {
    const innocent = await innocentBystander(server, database, 'beside-expansion');
    const uses = Array.from({ length: 600 }, (_, i) => `  t${i}: { type: t, title: "x", spec: { prompt: "\${params.blob}" } }`).join('\n');
    const yaml = `name: bomb\nparams: { blob: "${'z'.repeat(100_000)}" }\ntasks:\n${uses}\n`;
    expect(yaml.length).toBeLessThan(1024 * 1024);
    await refusedUnchanged(yaml, /params expand the DAG to more than 4194304 characters \(DAGENT_LIMIT_SPEC_CHARS\)/);
    await innocent.finish();
  });

  it('a YAML alias of a 500 kB string repeated twenty times is refused', async () => {
    const refs = Array.from({ length: 20 }, (_, i) => `  t${i}: { type: t, spec: { prompt: *big } }`).join('\n');
    await refusedUnchanged(`name: aliases\ndescription: &big "${'y'.repeat(500_000)}"\ntasks:\n${refs}\n`, /YAML aliases expand the DAG to more than 4194304 characters/);
  });

  it('more tasks than a DAG may hold, and more params than it may declare, are refused naming the field', async () => {
    const tasks = Array.from({ length: 20_001 }, (_, i) => `  t${i}: { type: t }`).join('\n');
    await refusedUnchanged(`name: wide\ntasks:\n${tasks}\n`, /tasks: 20001 tasks; at most 20000 in a DAG \(DAGENT_LIMIT_TASKS_PER_DAG\)/);
    const params = Array.from({ length: 101 }, (_, i) => `  p${i}: ${i}`).join('\n');
    await refusedUnchanged(`name: many-params\nparams:\n${params}\ntasks:\n  a: { type: t }\n`, /params: 101 params; at most 100/);
  });
});

describe('limits are set per process', () => {
  it('DAGENT_LIMIT_TASKS_PER_DAG=3 refuses a four-task DAG that the default allows', async () => {
    const small = await serverStart(database, { env: { DAGENT_LIMIT_TASKS_PER_DAG: '3' } });
    const four = 'name: four\ntasks:\n  a: { type: t }\n  b: { type: t }\n  c: { type: t }\n  d: { type: t }\n';
    await refused(400, 'DAG_INVALID', small.call('POST', '/api/dags', { raw: four, contentType: 'application/yaml' }), /4 tasks; at most 3/);
    expect((await server.call('POST', '/api/dags', { raw: four, contentType: 'application/yaml' })).status).toBe(201);
    await small.stop();
  });

  it('DAGENT_LIMIT_UPSTREAM_PER_TASK=2 refuses a join of three, naming the task and the variable', async () => {
    const narrow = await serverStart(database, { env: { DAGENT_LIMIT_UPSTREAM_PER_TASK: '2' } });
    const join = 'name: join\ntasks:\n  a: { type: t }\n  b: { type: t }\n  c: { type: t }\n  sum: { type: t, depends_on: [a, b, c] }\n';
    await refused(400, 'DAG_INVALID', narrow.call('POST', '/api/dags', { raw: join, contentType: 'application/yaml' }),
      /tasks\.sum\.depends_on: 3 upstream tasks; at most 2 \(DAGENT_LIMIT_UPSTREAM_PER_TASK\)/);
    expect((await server.call('POST', '/api/dags', { raw: join, contentType: 'application/yaml' })).status).toBe(201);
    await narrow.stop();
  });

  it('a limit set to something that is not a positive whole number stops the command with exit 2, naming the variable', () => {
    const r = spawnSync(process.execPath, [...CLI_COMPILED, 'status', 'dag_x'], { env: { ...process.env, DATABASE_URL: database.url, DAGENT_LIMIT_OUTPUT_BYTES: 'lots' }, encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/DAGENT_LIMIT_OUTPUT_BYTES=lots: expected a positive whole number/);
  });
});

describe('caps on what an agent may report', () => {
  it('an output over 1 MiB is refused by the engine before anything is written, and the runtime turns it into an invalid_output failure', async () => {
    const dagId = await dagCreate(database.db, 'name: big-output\ntasks:\n  a: { type: t }\n');
    await agentCreate(database.db, 'big-output-agent');
    const [t] = await taskClaim(database.db, 'big-output-agent', { dagId });
    expect(t?.dagId).toBe(dagId);
    const huge = { text: 'x'.repeat(1_100_000) };
    const before = await databaseSnapshot(database.db);
    await expect(taskComplete(database.db, { taskId: t!.id, fence: t!.fence, output: huge })).rejects.toThrow(InvalidInputError);
    expect(await databaseSnapshot(database.db)).toBe(before);
    expect(jsonStorable(huge)).toEqual({ error: expect.stringMatching(/output is 1100011 bytes as JSON; at most 1048576 \(DAGENT_LIMIT_OUTPUT_BYTES\)/) });
    expect(jsonStorable({ s: 'x\ud800' })).toEqual({ error: expect.stringMatching(/output\.s: .*surrogate/) });
  });
});
