import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { nanoid } from 'nanoid';
import { testDatabase } from '../helpers/db.js';
import { databaseSnapshot, rowsOf } from '../helpers/factories.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { innocentBystander } from './helpers/innocent.js';
import { httpAgent } from './helpers/agent.js';
import { refused, serverStart, type Reply } from './helpers/server.js';

// Trust boundary, third pass: dates PostgreSQL cannot store (a 500 before), a DAG raising another
// author's concurrency limit, names every JavaScript object has as group and subtask keys, and
// template errors that told which server files exist and where the server runs.
const database = await testDatabase();
const { db } = database;
const server = await serverStart(database);
const DIR = path.resolve('test/.tmp', `request-fields-${nanoid(6)}`);
mkdirSync(DIR, { recursive: true });
afterAll(() => rmSync(DIR, { recursive: true, force: true }));
const rel = (f: string) => path.relative(process.cwd(), path.join(DIR, f));

/** Refused with `status` and `code`, saying `why`, and nothing in the database changed. */
async function unchanged(r: () => Promise<Reply>, status: number, code: string, why: RegExp): Promise<Reply> {
  const before = await databaseSnapshot(db);
  const reply = await refused(status, code, r(), why);
  expect(await databaseSnapshot(db)).toBe(before);
  return reply;
}

const ONE = (name: string, extra = '') => `name: ${name}\ntasks:\n  a: { type: w, spec: { constraints: { capabilities: [w] } }${extra} }\n`;
const yaml = (raw: string, token?: string) => server.call('POST', '/api/dags', { raw, contentType: 'application/yaml', token });
const cursorOf = (at: string) => Buffer.from(JSON.stringify([at, 'dag_x'])).toString('base64url');

/** Dates PostgreSQL cannot store, or that do not exist: year 0, past year 9999, impossible days and offsets. */
const BAD_DATES = [
  '0000-01-01T00:00:00Z', '0000-02-29T00:00:00Z', '2023-02-29T00:00:00Z', '2024-01-01T00:00:00-23:59', '2024-01-01T00:00:00+14:01',
  '2024-01-01T24:00:00Z', '9999-12-31T23:59:59-00:01',
];

describe('every date a request gives is one PostgreSQL stores, else a 400 naming the field', () => {
  it('a log line\'s `at`: year 0, ±8.64e15 ms, year 275760, impossible dates and offsets; nothing is logged', async () => {
    const innocent = await innocentBystander(server, database, 'beside-log-dates');
    const dagId = await server.submit(ONE('log-dates'));
    const agent = await httpAgent(server, db, 'logger', { capabilities: ['w'] });
    const [t] = await agent.claim(dagId, 1);
    const log = (at: unknown) => server.call('POST', `/api/tasks/${t!.id}/logs`, { token: agent.token, body: { fence: t!.fence, lines: [{ message: 'fine' }, { message: 'dated', at }] } });
    for (const at of [...BAD_DATES, 8.64e15, -8.64e15, '+275760-09-13T00:00:00.000Z', -62_135_596_800_001, 'yesterday']) {
      await unchanged(() => log(at), 400, 'INVALID_INPUT', /body\.lines\.1\.at: /);
    }
    // The earliest and latest instants taken, kept between the claim and now as any agent's clock is.
    for (const at of ['0001-01-01T00:00:00Z', '9999-12-31T23:59:59.999+00:00', '2024-01-01T00:00:00-12:00', 0, Date.now()]) {
      const r = await log(at);
      expect(r.status, `${at}: ${JSON.stringify(r.body)}`).toBe(200);
    }
    const [n] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from attempt_logs where task_id = ${t!.id}`);
    expect(n!.n).toBe(10);
    await innocent.finish();
  });

  it('list filters (from, to) of DAGs and dead letters, the bulk action\'s filter, and a cursor carrying such a date', async () => {
    for (const bad of BAD_DATES) {
      const q = encodeURIComponent(bad);
      await unchanged(() => server.call('GET', `/api/dags?from=${q}`), 400, 'INVALID_INPUT', /query\.from: /);
      await unchanged(() => server.call('GET', `/api/dags?to=${q}`), 400, 'INVALID_INPUT', /query\.to: /);
      await unchanged(() => server.call('GET', `/api/dlq?from=${q}`), 400, 'INVALID_INPUT', /query\.from: /);
      await unchanged(() => server.call('POST', '/api/dlq/bulk', { body: { action: 'cancel', filter: { to: bad } } }), 400, 'INVALID_INPUT', /body\.filter\.to: /);
    }
    for (const at of ['0000-01-01 00:00:00+00', '2024-01-01 00:00:00+16', '2023-02-29 00:00:00.123456+00', '0001-01-01 00:00:00+00 BC']) {
      await unchanged(() => server.call('GET', `/api/dags?cursor=${cursorOf(at)}`), 400, 'INVALID_INPUT', /cursor: not a cursor this list gave/);
      await unchanged(() => server.call('GET', `/api/dlq?cursor=${cursorOf(at)}`), 400, 'INVALID_INPUT', /cursor: not a cursor this list gave/);
    }
    // The whole range, and the widest offsets, are taken.
    const wide = `from=${encodeURIComponent('0001-01-01T00:00:00+00:00')}&to=${encodeURIComponent('9999-12-31T23:59:59Z')}`;
    for (const list of ['dags', 'dlq']) expect((await server.call('GET', `/api/${list}?${wide}`)).status).toBe(200);
    expect((await server.call('GET', `/api/dags?from=${encodeURIComponent('2024-01-01T00:00:00+14:00')}&to=${encodeURIComponent('2024-01-01T00:00:00-12:00')}`)).status).toBe(200);
    expect((await server.call('GET', `/api/dags?cursor=${cursorOf('9999-12-31 23:59:59.999999+00')}`)).status).toBe(200);
  });

  it('a DAG\'s deadline and not_before are held to the same range at submit, naming the task\'s field', async () => {
    await unchanged(() => yaml(ONE('deadline-0', ', deadline: "0000-01-01T00:00:00Z"')), 400, 'DAG_INVALID', /tasks\.a\.deadline: "0000-01-01T00:00:00Z" is outside the years 1 to 9999/);
    await unchanged(() => yaml(ONE('nb-offset', ', not_before: "2024-01-01T00:00:00-23:59"')), 400, 'DAG_INVALID', /tasks\.a\.not_before: .*offset/);
    await unchanged(() => yaml(ONE('deadline-10000', ', deadline: "9999-12-31T23:30:00-01:00"')), 400, 'DAG_INVALID', /tasks\.a\.deadline: /);
    expect((await yaml(ONE('deadline-far', ', deadline: "9999-12-31T23:59:59Z"'))).status).toBe(201);
  });
});

describe('a concurrency key\'s limit: the strictest wins', () => {
  it('another author\'s DAG cannot raise the limit a DAG set on a shared key; an agent holds one of its tasks at a time', async () => {
    const innocent = await innocentBystander(server, database, 'beside-keys');
    const authorA = (await tokenCreate(db, { role: 'submit', name: 'author-a' })).token;
    const authorB = (await tokenCreate(db, { role: 'submit', name: 'author-b' })).token;
    const guarded = await yaml(`name: guarded\nconcurrency: { key: "db:prod", limit: 1 }\ntasks:\n${['m1', 'm2', 'm3'].map((k) => `  ${k}: { type: w, spec: { constraints: { capabilities: [w] } } }\n`).join('')}`, authorA);
    expect(guarded.status, JSON.stringify(guarded.body)).toBe(201);
    const raiser = await yaml('name: raiser\nconcurrency: { key: "db:prod", limit: 10000 }\ntasks:\n  r: { type: w, spec: { constraints: { capabilities: [w] } } }\n', authorB);
    expect(raiser.status, JSON.stringify(raiser.body)).toBe(201);
    expect(await rowsOf(db, sql`select lim from concurrency_keys where key = 'db:prod'`)).toEqual([{ lim: 1 }]);

    const agent = await httpAgent(server, db, 'db-worker', { capabilities: ['w'] });
    const held = await agent.claim(guarded.body.results[0].dagId, 10);
    expect(held).toHaveLength(1);
    expect(await agent.claim(raiser.body.results[0].dagId, 10)).toEqual([]);
    expect((await agent.complete(held[0]!, { ok: true })).status).toBe(200);
    expect(await agent.claim(guarded.body.results[0].dagId, 10)).toHaveLength(1);
    await innocent.finish();
  });
});

describe('names every JavaScript object has are refused wherever task keys are checked', () => {
  const NAMES = Object.getOwnPropertyNames(Object.prototype);
  /** A key `__proto__` is refused when the YAML is read, before any name is checked. */
  const reserved = (name: string) => `"${name}" is (a reserved name|not allowed as a key)`;

  it('as a group\'s key, each of them, naming it as reserved', async () => {
    expect(NAMES).toEqual(expect.arrayContaining(['constructor', '__proto__', 'hasOwnProperty', 'valueOf', 'toString', 'isPrototypeOf']));
    for (const name of NAMES) {
      const group = `name: grouped\ntasks:\n  ${JSON.stringify(name)}: { use: dags/templates/review-loop.yaml, with: { path: src } }\n`;
      await unchanged(() => yaml(group), 400, 'DAG_INVALID', new RegExp(`tasks\\.${name}: ${reserved(name)}`));
    }
  });

  it('as a template\'s task key, each of them', async () => {
    for (const name of NAMES) {
      writeFileSync(path.join(DIR, 'reserved.yaml'), `tasks:\n  ${JSON.stringify(name)}: { type: w }\n`);
      await unchanged(() => yaml(`name: grouped\ntasks:\n  g: { use: ${rel('reserved.yaml')} }\n`), 400, 'DAG_INVALID', new RegExp(reserved(name)));
    }
  });

  it('as a subtask\'s key, each of them', async () => {
    const dagId = await server.submit(ONE('spawner'));
    const agent = await httpAgent(server, db, 'spawner', { capabilities: ['w'] });
    const [t] = await agent.claim(dagId, 1);
    for (const name of NAMES) {
      await unchanged(() => agent.spawn(t!, [{ key: name, type: 'w' }]), 400, 'INVALID_INPUT', new RegExp(`subtasks\\[0\\]\\.key: "${name}" is a reserved name`));
    }
    expect((await agent.spawn(t!, [{ key: 'fine', type: 'w' }])).status).toBe(200);
  });
});

describe('template and file errors say nothing of the server\'s files outside the project', () => {
  it('a path outside the project gets one answer whether or not the file exists, naming no server path', async () => {
    const group = (use: string) => `name: grouped\ntasks:\n  g: { use: "${use}" }\n`;
    const outside: string[] = [];
    for (const use of ['/etc/hostname', '/etc/no-such-template.yaml', '../../../../../../etc/passwd', '../../../../../../etc/nothing-here']) {
      const r = await unchanged(() => yaml(group(use)), 400, 'DAG_INVALID', /is outside the DAG's directory/);
      outside.push((r.body.error.message as string).replace(use, 'USE'));
    }
    expect(new Set(outside).size).toBe(1);
    // Through a symlink in the project that leads out: the same answer, there or not.
    symlinkSync('/etc', path.join(DIR, 'etc-link'));
    for (const use of [rel('etc-link/hostname'), rel('etc-link/no-such-template.yaml')]) {
      const r = await unchanged(() => yaml(group(use)), 400, 'DAG_INVALID', /is outside the DAG's directory/);
      expect((r.body.error.message as string).replace(use, 'USE')).toBe(outside[0]);
    }
    const missing = await unchanged(() => yaml(group('dags/templates/missing.yaml')), 400, 'DAG_INVALID', /template dags\/templates\/missing\.yaml not found \(looked in dags\/templates\)/);
    for (const m of [...outside, missing.body.error.message as string]) {
      expect(m).not.toContain(process.cwd());
      expect(m).not.toMatch(/looked in \//);
    }
    const schema = await unchanged(() => yaml(`name: files\ntasks:\n  t: { type: w, output: { validation: { kind: json-schema, schema_file: "/etc/nothing-here.json" } } }\n`),
      400, 'DAG_INVALID', /schema file \/etc\/nothing-here\.json is outside the DAG's directory/);
    expect(schema.body.error.message).not.toContain(process.cwd());
    const cwd = await unchanged(() => yaml(`name: steps\ntasks:\n  t: { type: w, output: { validation: { kind: test, command: "true", cwd: /tmp } } }\n`),
      400, 'DAG_INVALID', /\/tmp is outside the DAG's directory/);
    expect(cwd.body.error.message).not.toContain(process.cwd());
  });
});
