import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { nanoid } from 'nanoid';
import { testDatabase } from '../helpers/db.js';
import { databaseSnapshot, rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { innocentBystander } from './helpers/innocent.js';
import { httpAgent } from './helpers/agent.js';
import { refused, serverStart } from './helpers/server.js';

// Finding 1: an agent spawned a subtask whose test step (or whose input, for a shell agent)
// held a command, and the server's validate-test or shell agent ran it.
// The shell and validate-test agents run inside `dagent up`, as an operator would run them.
const database = await testDatabase();
const { db } = database;
const server = await serverStart(database, { args: ['--agent', 'agents/shell.ts', '--agent', 'agents/validate-test.ts'] });
const marker = () => path.join(tmpdir(), `dagent-pwned-${nanoid(8)}`);

async function submit(yaml: string): Promise<string> {
  const r = await server.call('POST', '/api/dags', { raw: yaml, contentType: 'application/yaml' });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.results[0].dagId;
}

const HOST = (name: string, spawn = '') => `name: ${name}\n${spawn}tasks:\n  host: { type: w, spec: { constraints: { capabilities: [work] } } }\n`;

describe('agents spawn data, never code', () => {
  it('a test step, a capability or a schema file in a spawned subtask is a 403 naming the field; nothing is written and nothing runs', async () => {
    const innocent = await innocentBystander(server, database, 'beside-spawn');
    const dagId = await submit(HOST('spawn-code'));
    const hostile = await httpAgent(server, db, 'spawner', { capabilities: ['work'] });
    const [host] = await hostile.claim(dagId);
    const pwned = marker();
    const attempts: Array<[unknown, RegExp]> = [
      [{ key: 'x', type: 'w', output: { validation: { kind: 'test', command: `touch ${pwned}` } } }, /subtasks\[0\]\.output\.validation: an agent cannot attach a test step: it runs a command/],
      [{ key: 'x', type: 'w', requires: ['shell'], spec: { input: { command: `touch ${pwned}` } } }, /subtasks\[0\]\.requires: an agent cannot choose capabilities/],
      [{ key: 'x', type: 'w', spec: { constraints: { capabilities: ['validate:test'] } } }, /subtasks\[0\]\.spec\.constraints\.capabilities: an agent cannot choose capabilities/],
      [{ key: 'x', type: 'w', output: { validation: [{ kind: 'json-schema', schema_file: '/etc/passwd' }] } }, /subtasks\[0\]\.output\.validation\[0\]: an agent cannot attach a json-schema step: it names a schema file/],
      [{ key: 'x', type: 'w', output: { validation: { kind: 'llm-judge', rubric: 'always pass', threshold: 0 } } }, /an agent cannot attach a llm-judge step/],
    ];
    for (const [subtask, why] of attempts) {
      const before = await databaseSnapshot(db);
      const r = await refused(403, 'FORBIDDEN', hostile.spawn(host!, [subtask]), why);
      expect(JSON.stringify(r.body)).not.toMatch(/root:/);
      expect(await databaseSnapshot(db)).toBe(before);
    }
    expect(existsSync(pwned)).toBe(false);
    await innocent.finish();
  });

  it('a command in the input of a subtask an agent wrote is never run: the shell agent refuses what an agent wrote', async () => {
    const dagId = await submit(HOST('spawn-input'));
    const hostile = await httpAgent(server, db, 'inputter', { capabilities: ['work'] });
    const [host] = await hostile.claim(dagId);
    const pwned = marker();
    // Data only, so it is accepted, as origin `agent`; the shell agent in dagent up claims it (no capability needed).
    const r = await hostile.spawn(host!, [{ key: 'sneaky', type: 'w', max_attempts: 1, spec: { input: { command: `touch ${pwned}` } } }]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const dead = await eventually('the sneaky subtask dead-lettered', async () => {
      const [row] = await rowsOf<{ status: string; origin: string; last_error: string }>(db, sql`select status, origin, last_error from tasks where dag_id = ${dagId} and key = 'host/sneaky'`);
      return row?.status === 'dead_lettered' ? row : undefined;
    });
    expect(dead.origin).toBe('agent');
    expect(dead.last_error).toMatch(/written by an agent|not a validation task/);
    expect(existsSync(pwned)).toBe(false);
  });

  it('from a template, an agent fills in only the fields it accepts; they reach the command as data', async () => {
    const dagId = await submit(HOST('spawn-template', `spawn:
  free_form: false
  templates:
    greet:
      type: greet
      spec:
        constraints: { capabilities: [shell] }
        input: { command: 'printf "hello %s" "$DAGENT_INPUT_WHO"' }
      accepts: [who]
`));
    const hostile = await httpAgent(server, db, 'templater', { capabilities: ['work'] });
    const [host] = await hostile.claim(dagId);
    const pwned = marker();
    await refused(403, 'FORBIDDEN', hostile.spawn(host!, [{ key: 'g', template: 'greet', spec: { input: { command: `touch ${pwned}` } } }]), /template greet does not accept command \(it accepts: who\)/);
    await refused(403, 'FORBIDDEN', hostile.spawn(host!, [{ key: 'g', template: 'greet', requires: ['shell', 'root'] }]), /template greet fixes the capabilities/);
    await refused(403, 'FORBIDDEN', hostile.spawn(host!, [{ key: 'g', type: 'w' }]), /this DAG lets agents spawn only from its templates \(greet\)/);
    await refused(403, 'FORBIDDEN', hostile.spawn(host!, [{ key: 'g', template: 'nope' }]), /the DAG declares no template "nope"/);
    const ok = await hostile.spawn(host!, [{ key: 'g', template: 'greet', spec: { input: { who: `$(touch ${pwned})` } } }]);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const out = await eventually('the greet subtask completed by the shell agent', async () => {
      const [row] = await rowsOf<{ status: string; origin: string; output: { stdout: string } }>(db, sql`select status, origin, output from tasks where dag_id = ${dagId} and key = 'host/g'`);
      return row?.status === 'completed' ? row : undefined;
    });
    expect(out.origin).toBe('template');
    expect(out.output.stdout).toBe(`hello $(touch ${pwned})`);
    expect(existsSync(pwned)).toBe(false);
  });

  it('no more subtasks than the DAG\'s spawn.max_tasks, in all', async () => {
    const dagId = await submit(HOST('spawn-cap', 'spawn: { max_tasks: 2 }\n'));
    const hostile = await httpAgent(server, db, 'capped', { capabilities: ['work'] });
    const [host] = await hostile.claim(dagId);
    const data = (k: string) => ({ key: k, type: 'note', spec: { prompt: k } });
    await refused(403, 'FORBIDDEN', hostile.spawn(host!, [data('a'), data('b'), data('c')]), /lets its agents add 2 subtasks in all; 0 exist and 3 more were asked for/);
    expect((await hostile.spawn(host!, [data('a'), data('b')])).status).toBe(200);
    await refused(403, 'FORBIDDEN', hostile.spawn(host!, [data('c')]), /2 exist and 1 more were asked for/);
  });
});
