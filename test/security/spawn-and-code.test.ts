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

const submit = (yaml: string) => server.submit(yaml);

const HOST = (name: string, spawn = '') => `name: ${name}\n${spawn}tasks:\n  host: { type: w, spec: { constraints: { capabilities: [work] } } }\n`;

describe('agents spawn data, never code', () => {
  it('a test step, a capability or a schema file in a spawned subtask is a 403 naming the field; nothing is written and nothing runs', async () => {
    const innocent = await innocentBystander(server, database, 'beside-spawn');
    const dagId = await submit(HOST('spawn-code'));
    const hostile = await httpAgent(server, db, 'spawner', { capabilities: ['work'] });
    const [host] = await hostile.claim(dagId);
    const pwned = marker();
    const ownSteps = /an agent cannot say how its work is validated/;
    const attempts: Array<[unknown, RegExp]> = [
      [{ key: 'x', type: 'w', output: { validation: { kind: 'test', command: `touch ${pwned}` } } }, /subtasks\[0\]\.output\.validation: an agent cannot say how its work is validated/],
      [{ key: 'x', type: 'w', requires: ['shell'], spec: { input: { command: `touch ${pwned}` } } }, /subtasks\[0\]\.requires: an agent cannot choose capabilities/],
      [{ key: 'x', type: 'w', spec: { constraints: { capabilities: ['validate:test'] } } }, /subtasks\[0\]\.spec\.constraints\.capabilities: an agent cannot choose capabilities/],
      [{ key: 'x', type: 'w', output: { validation: [{ kind: 'json-schema', schema_file: '/etc/passwd' }] } }, ownSteps],
      [{ key: 'x', type: 'w', output: { validation: { kind: 'llm-judge', rubric: 'always pass', threshold: 0 } } }, ownSteps],
      // An inline schema is code of the agent's making too: its patterns and sizes would run in the server.
      [{ key: 'x', type: 'w', output: { validation: { kind: 'json-schema', schema: { type: 'string', pattern: '^(a+)+$' } } } }, ownSteps],
      [{ key: 'x', type: 'w', output: { validation: { kind: 'regex', pattern: '^(a+)+$' } } }, ownSteps],
      [{ key: 'x', type: 'w', spec: { models: ['most-expensive-model'] } }, /subtasks\[0\]\.spec\.models: an agent cannot choose models/],
      [{ key: 'x', type: 'w', spec: { fallback_models: ['most-expensive-model'] } }, /subtasks\[0\]\.spec\.fallback_models: an agent cannot choose models/],
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

  it('a subtask of the agent\'s own making inherits its parent\'s capabilities and models, so it goes only to agents that could run the parent', async () => {
    const dagId = await submit(`name: spawn-inherit
tasks:
  host: { type: w, spec: { models: [small], fallback_models: [tiny], constraints: { capabilities: [work] } } }
`);
    const hostile = await httpAgent(server, db, 'inheritor', { capabilities: ['work'], models: ['small'] });
    const [host] = await hostile.claim(dagId);
    const pwned = marker();
    const r = await hostile.spawn(host!, [{ key: 'sneaky', type: 'w', spec: { input: { command: `touch ${pwned}` } } }]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const [row] = await rowsOf<{ origin: string; required_capabilities: string[]; models: string[]; fallback: string[] }>(db, sql`
      select origin, required_capabilities, spec->'models' as models, spec->'fallbackModels' as fallback
      from tasks where dag_id = ${dagId} and key = 'host/sneaky'`);
    expect(row).toEqual({ origin: 'agent', required_capabilities: ['work'], models: ['small'], fallback: ['tiny'] });
    // The shell agent in dagent up lacks \`work\`: the subtask is not offered to it.
    const [offered] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from tasks where dag_id = ${dagId} and claimed_by is not null and claimed_by <> 'inheritor'`);
    expect(offered!.n).toBe(0);
    expect(existsSync(pwned)).toBe(false);
  });

  it('the shell agent refuses a task an agent wrote even when it requires shell (a subtask under a shell-capable parent)', async () => {
    // An agent that holds a shell-capable task spawns a free-form subtask: it inherits \`shell\`.
    // The gate keeps it pending until its origin is set as such a spawn would set it.
    const pwned = marker();
    const dagId = await submit(`name: spawn-shell-parent
tasks:
  gate: { type: w, spec: { constraints: { capabilities: [work] } } }
  sneaky: { type: w, max_attempts: 1, depends_on: [gate], spec: { constraints: { capabilities: [shell] }, input: { command: 'touch ${pwned}' } } }
`);
    await db.execute(sql`update tasks set origin = 'agent' where dag_id = ${dagId} and key = 'sneaky'`);
    const gatekeeper = await httpAgent(server, db, 'gatekeeper', { capabilities: ['work'] });
    const [gate] = await gatekeeper.claim(dagId);
    expect((await gatekeeper.complete(gate!, 'open')).status).toBe(200);
    const dead = await eventually('the sneaky task dead-lettered', async () => {
      const [row] = await rowsOf<{ status: string; claimed: string; last_error: string }>(db, sql`
        select t.status, a.agent_id as claimed, t.last_error from tasks t join attempts a on a.task_id = t.id
        where t.dag_id = ${dagId} and t.key = 'sneaky'`);
      return row?.status === 'dead_lettered' ? row : undefined;
    });
    expect(dead.last_error).toMatch(/written by an agent/);
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

  it('a for_each over an agent\'s output: each item reaches the author\'s command as DAGENT_INPUT_ITEM, never its command line', async () => {
    const dagId = await submit(`name: map-shell
tasks:
  host: { type: w, spec: { constraints: { capabilities: [work] } } }
  each:
    type: greet
    depends_on: [host]
    for_each: host.names
    spec: { constraints: { capabilities: [shell] }, input: { command: 'printf "hello %s" "$DAGENT_INPUT_ITEM"' } }
`);
    const hostile = await httpAgent(server, db, 'mapper-feeder', { capabilities: ['work'] });
    const [host] = await hostile.claim(dagId);
    const pwned = marker();
    expect((await hostile.complete(host!, { names: [`$(touch ${pwned})`, 'ada; touch ' + pwned] })).status).toBe(200);
    // dagent up's waits loop maps the list; its shell agent runs each child; the loop collects their outputs.
    const each = await eventually('the for_each task completed', async () => {
      const [row] = await rowsOf<{ status: string; output: Array<{ stdout: string }> }>(db, sql`select status, output from tasks where dag_id = ${dagId} and key = 'each'`);
      return row?.status === 'completed' ? row : undefined;
    }, 30_000);
    expect(each.output.map((o) => o.stdout)).toEqual([`hello $(touch ${pwned})`, `hello ada; touch ${pwned}`]);
    const children = await rowsOf<{ origin: string }>(db, sql`select origin from tasks where dag_id = ${dagId} and key like 'each/%'`);
    expect(children).toEqual([{ origin: 'template' }, { origin: 'template' }]);
    expect(existsSync(pwned)).toBe(false);
  });

  it('a template cannot accept a field it fixes under another case (both would be DAGENT_INPUT_NAME): refused at submit', async () => {
    await refused(400, 'DAG_INVALID', server.call('POST', '/api/dags', { raw: HOST('spawn-case', `spawn:
  templates:
    greet:
      type: greet
      spec: { constraints: { capabilities: [shell] }, input: { command: 'rm -rf "/tmp/$DAGENT_INPUT_NAME"', name: scratch } }
      accepts: [NAME]
`), contentType: 'application/yaml' }), /spawn\.templates\.greet\.accepts\[0\]: NAME is fixed in spec\.input \(as name: names are compared without case/);
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

describe('agents spawn within what the DAG allows them to spend', () => {
  it('a subtask of its own making keeps its parent\'s cost, duration and heartbeat ceilings (lower only) and is never more urgent than it', async () => {
    const dagId = await submit(`name: spawn-budget
budget_usd: 1
defaults: { priority: 40, constraints: { capabilities: [paid], max_cost_usd: 0.5, max_duration_sec: 600 } }
tasks:
  root: { type: w }
`);
    const spender = await httpAgent(server, db, 'spender', { capabilities: ['paid'] });
    const [root] = await spender.claim(dagId, 1);
    const r = await spender.spawn(root!, [
      ...Array.from({ length: 4 }, (_, i) => ({ key: `s${i}`, type: 'w' })),
      { key: 'dear', type: 'w', priority: 0, spec: { constraints: { max_cost_usd: 50, max_duration_sec: 604800, heartbeat_sec: 3600 } } },
      { key: 'cheap', type: 'w', priority: 90, spec: { constraints: { max_cost_usd: 0.1 } } },
    ]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const rows = await rowsOf<{ key: string; max_cost_usd: number; max_duration_sec: number; heartbeat_sec: number | null; priority: number }>(db, sql`
      select key, max_cost_usd::float8 as max_cost_usd, max_duration_sec, heartbeat_sec, priority from tasks where dag_id = ${dagId} and parent_id is not null order by key`);
    expect(rows).toEqual([
      { key: 'root/cheap', max_cost_usd: 0.1, max_duration_sec: 600, heartbeat_sec: null, priority: 90 },
      { key: 'root/dear', max_cost_usd: 0.5, max_duration_sec: 600, heartbeat_sec: 20, priority: 40 },
      ...Array.from({ length: 4 }, (_, i) => ({ key: `root/s${i}`, max_cost_usd: 0.5, max_duration_sec: 600, heartbeat_sec: null, priority: 40 })),
    ]);
    // Each subtask reserves its ceiling against the DAG's budget: with the root's 0.5 held, only 0.5 is left.
    const other = await httpAgent(server, db, 'other-payer', { capabilities: ['paid'] });
    const got = await other.claim(dagId, 20);
    const reserved = got.reduce((sum, t) => sum + ((t as { maxCostUsd?: number }).maxCostUsd ?? 0), 0);
    expect(reserved).toBeLessThanOrEqual(0.5);
    const [dag] = await rowsOf<{ reserved: number; budget: number }>(db, sql`select reserved_usd::float8 as reserved, budget_usd::float8 as budget from dags where id = ${dagId}`);
    expect(dag!.reserved).toBeLessThanOrEqual(dag!.budget);
  });
});
