import net from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { cliWith } from '../helpers/cli.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, databaseSnapshot, rowsOf } from '../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
const env = { ...process.env, DATABASE_URL: database.url };

const cli = cliWith(env);

describe('dagent CLI', () => {
  it('submits, shows status, and resolves dead letters through the dlq commands', async () => {
    const submitted = await cli('submit', 'dags/examples/code-change.yaml', '--param', 'ticket=ENG-9', '--json');
    expect(submitted.code).toBe(0);
    const [{ dagId, tasks, created }] = submitted.json();
    expect({ tasks, created }).toEqual({ tasks: 6, created: true });

    const status = await cli('status', dagId, '--json');
    expect(status.json().dag).toMatchObject({ id: dagId, status: 'running', title: 'Implement ENG-9' });
    expect(status.json().tasks.find((t: { key: string }) => t.key === 'design').status).toBe('ready');
    const human = await cli('status', dagId);
    expect(human.stdout).toMatch(/design\s+ready\s+0\/4/);

    const agentId = await agentCreate(db, 'cli-agent', ['llm'], undefined, { models: ['*'] });
    const [design] = await taskClaim(db, agentId);
    const failed = await taskFail(db, { taskId: design!.id, fence: design!.fence, errorClass: 'auth_failure', message: 'bad key', retryable: false });
    expect(failed.status).toBe('dead_lettered');

    const list = await cli('dlq', 'list', '--json');
    expect(list.json()).toHaveLength(1);
    const entryId = list.json()[0].id;
    const shown = await cli('dlq', 'show', entryId);
    expect(shown.stdout).toContain('non-retryable auth_failure error');
    expect(shown.stdout).toMatch(/cli-agent\s+failed\s+auth_failure\s+bad key/);
    expect((await cli('status', dagId, '--json')).json().dag.status).toBe('blocked');

    expect((await cli('dlq', 'retry', entryId, '--reset-attempts', '--note', 'rotated key')).code).toBe(0);
    expect((await cli('status', dagId, '--json')).json().dag.status).toBe('running');
    const again = await cli('dlq', 'retry', entryId);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already resolved/);

    const [retried] = await taskClaim(db, agentId);
    expect(retried!.key).toBe('design');
    await taskComplete(db, { taskId: retried!.id, fence: retried!.fence, output: { design: 'ok' } });

    const shownTask = await cli('task', 'show', retried!.id, '--json');
    expect(shownTask.json().attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['failed', 'completed']);
    expect(shownTask.json().events.map((e: { type: string }) => e.type)).toEqual(expect.arrayContaining(['task.failed', 'task.dead_lettered', 'dlq.retried']));

    const graph = await cli('graph', dagId);
    expect(graph.stdout).toContain('design --> implement');
    expect(graph.stdout).toContain('class design completed');
    const tasksReady = await cli('tasks', '--dag', dagId, '--status', 'ready', '--json');
    expect(tasksReady.json().map((t: { key: string }) => t.key)).toEqual(['implement']);

    const stats = await cli('stats', '--json');
    expect(stats.json().agents.map((a: { id: string }) => a.id)).toContain('cli-agent');

    const cancelled = await cli('cancel', dagId, '--json');
    expect(cancelled.json().cancelled.map((c: { key: string }) => c.key).sort()).toEqual(['implement', 'lint', 'merge', 'review', 'unit-tests']);
    expect((await cli('status', dagId, '--json')).json().dag.status).toBe('cancelled');
  });

  it('refuses bad input with exit code 2 (an unknown id: 4) and writes nothing', async () => {
    const before = await databaseSnapshot(db);
    expect((await cli('status', 'dag_doesnotexist')).code).toBe(4);
    for (const argv of [
      ['tasks', '--status', 'redy'],
      ['cancel', 'nonsense'],
      ['submit', 'dags/examples/code-change.yaml'],
      ['submit', 'dags/examples/research-report.yaml', '--param', 'nope=1'],
      ['submit', 'dags/examples/research-report.yaml', 'test/fixtures/bad/22-two-cycle.yaml'],
      ['graph', 'dags/examples/release-train.yaml', '--format', 'png'],
      ['dlq', 'cancel', 'dlq_x'],
      ['frobnicate'],
    ]) {
      const r = await cli(...argv);
      expect(r.code, argv.join(' ')).toBe(2);
    }
    const missing = await cli('tasks', '--status', 'redy');
    expect(missing.stderr).toContain('did you mean "ready"?');
    expect(await databaseSnapshot(db)).toBe(before);
  });

  it('lists a DAG\'s tasks in natural key order: w0, w1, w2, …, w10 (status, tasks, a limit of tasks, the unclaimable ones)', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-cli-'));
    const keys = Array.from({ length: 13 }, (_, i) => `w${i}`);
    // Declared last first, so neither the file's order nor the rows' comes out natural by chance; no agent can take them.
    const tasks = [...keys].reverse().map((k) => `  ${k}: { type: t, spec: { constraints: { capabilities: [no-such-agent] } } }`);
    writeFileSync(path.join(dir, 'numbered.yaml'), `name: numbered\ntasks:\n${tasks.join('\n')}\n`);
    const [{ dagId }] = (await cli('submit', path.join(dir, 'numbered.yaml'), '--json')).json();
    const keysOf = (rows: Array<{ key: string; dagId?: string }>) => rows.filter((r) => r.dagId === undefined || r.dagId === dagId).map((r) => r.key);

    expect(keysOf((await cli('status', dagId, '--json')).json().tasks)).toEqual(keys);
    const human = (await cli('status', dagId)).stdout;
    expect([...human.matchAll(/^\s*(w\d+)\s/gm)].map((m) => m[1])).toEqual(keys);
    expect(keysOf((await cli('tasks', '--dag', dagId, '--json')).json())).toEqual(keys);
    // A limit keeps the first in that order (all thirteen tie on priority and age): not w10, w11, w12 before w2.
    expect(keysOf((await cli('tasks', '--dag', dagId, '--limit', '4', '--json')).json())).toEqual(['w0', 'w1', 'w2', 'w3']);
    expect(keysOf((await cli('tasks', '--unclaimable', '--json')).json())).toEqual(keys);
  });

  it('submits several files in one transaction: all or none', async () => {
    const before = await databaseSnapshot(db);
    const bad = await cli('submit', 'dags/examples/release-train.yaml', 'test/fixtures/bad/19-unknown-dependency.yaml');
    expect(bad.code).toBe(2);
    expect(await databaseSnapshot(db)).toBe(before);
    const good = await cli('submit', 'dags/examples/release-train.yaml', 'dags/examples/dependency-audit.yaml', '--json');
    expect(good.json()).toHaveLength(2);
  });

  it('rolls back earlier DAGs of a submission when a later one fails inside the transaction', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-cli-'));
    const withKey = (name: string) => `name: ${name}\ntasks:\n  only: { type: t, idempotency_key: nightly-2026-11-21 }\n`;
    writeFileSync(path.join(dir, 'first.yaml'), withKey('first'));
    writeFileSync(path.join(dir, 'second.yaml'), withKey('second'));
    writeFileSync(path.join(dir, 'plain.yaml'), 'name: plain\ntasks:\n  a: { type: t }\n');
    expect((await cli('submit', path.join(dir, 'first.yaml'))).code).toBe(0);
    const before = await databaseSnapshot(db);
    const r = await cli('submit', path.join(dir, 'plain.yaml'), path.join(dir, 'second.yaml'));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('idempotency key already used');
    expect(await databaseSnapshot(db)).toBe(before);
  });
});

describe('exit codes scripts can rely on', () => {
  it('not found is 4, an unreachable or silent database 5 and a missing one 2, each one line naming it, a port in use 2 with a hint', async () => {
    const notFound = await cli('status', 'dag_00000000000000');
    expect([notFound.code, notFound.stderr]).toEqual([4, 'error: DAG dag_00000000000000 not found\n']);
    const down = await cliWith({ ...process.env, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere' })('tasks');
    expect(down.code).toBe(5);
    expect(down.stderr).toMatch(/^error: cannot reach PostgreSQL at 127\.0\.0\.1:1 \(.*ECONNREFUSED.*\): is it running\? Unset DATABASE_URL to use the embedded server in \.dagent\n$/);
    // A server that accepts the connection and never answers (a hung host, a half-open path): exit 5 too, in bounded time.
    const silent = net.createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    try {
      const hung = await cliWith({ ...process.env, DATABASE_URL: `postgres://postgres@127.0.0.1:${(silent.address() as net.AddressInfo).port}/x` })('tasks');
      expect(hung.code).toBe(5);
      expect(hung.stderr).toMatch(/^error: cannot reach PostgreSQL at 127\.0\.0\.1:\d+ \((Connection terminated|timeout).*\): is it running\?/);
    } finally {
      silent.close();
    }
    const missing = new URL(database.url);
    missing.pathname = '/dagent_no_such_database';
    const noDb = await cliWith({ ...process.env, DATABASE_URL: missing.toString() })('tasks');
    expect(noDb.code).toBe(2);
    expect(noDb.stderr).toMatch(/^error: PostgreSQL at [^ ]+\/dagent_no_such_database refused: database "dagent_no_such_database" does not exist; create it \(createdb dagent_no_such_database\) or point DATABASE_URL at one that exists\n$/);
    const holder = net.createServer();
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', () => r()));
    const port = (holder.address() as net.AddressInfo).port;
    try {
      const up = await cli('up', '--port', String(port));
      expect(up.code).toBe(2);
      expect(up.stderr).toMatch(new RegExp(`^error: cannot listen on 127\\.0\\.0\\.1:${port}: it is in use \\(EADDRINUSE\\); choose another with --port`, 'm'));
      expect(up.stderr).not.toMatch(/\n\s+at /); // no stack trace
    } finally {
      holder.close();
    }
  });
});

describe('dlq retry and cancel in bulk', () => {
  it('--dag retries every open entry of a DAG in one go; --error-class cancels; an id and filters together, or neither, is exit 2', async () => {
    const dagId = await dagCreate(db, 'name: bulk-dlq\ntasks:\n  a: { type: t, max_attempts: 1 }\n  b: { type: t, max_attempts: 1 }\n  c: { type: t, max_attempts: 1 }\n');
    await agentCreate(db, 'bulk-dlq-agent');
    const held = await taskClaim(db, 'bulk-dlq-agent', { dagId, limit: 3 });
    for (const t of held) await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: t.key === 'c' ? 'hopeless' : 'flaky', message: 'no' });
    const before = await databaseSnapshot(db);
    expect((await cli('dlq', 'retry')).code).toBe(2);
    const both = await cli('dlq', 'retry', 'dlq_x', '--dag', dagId);
    expect([both.code, both.stderr]).toEqual([2, expect.stringMatching(/give one dead-letter id, or filters for a bulk action/)]);
    expect(await databaseSnapshot(db)).toBe(before);

    const cancelled = await cli('dlq', 'cancel', '--error-class', 'hopeless', '--note', 'not worth it', '--json');
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(cancelled.json()).toMatchObject({ action: 'cancel', ids: [expect.stringMatching(/^dlq_/)] });
    const retried = await cli('dlq', 'retry', '--dag', dagId, '--json');
    expect(retried.json()).toMatchObject({ action: 'retry', ids: [expect.any(String), expect.any(String)] });
    const statuses = await rowsOf<{ key: string; status: string }>(db, sql`select key, status from tasks where dag_id = ${dagId} order by key`);
    expect(statuses).toEqual([{ key: 'a', status: 'ready' }, { key: 'b', status: 'ready' }, { key: 'c', status: 'cancelled' }]);
  });
});

describe('dlq retry --edit and --patch', () => {
  async function deadLetter(name: string): Promise<{ dagId: string; entryId: string; taskId: string }> {
    const dagId = await dagCreate(db, `name: ${name}\ntasks:\n  a: { type: t, max_attempts: 1, priority: 50, spec: { prompt: "summarise the report", input: { pages: 3 } } }\n`);
    await agentCreate(db, `${name}-agent`);
    const [held] = await taskClaim(db, `${name}-agent`, { dagId, limit: 1 });
    await taskFail(db, { taskId: held!.id, fence: held!.fence, errorClass: 'invalid_output', message: 'too long' });
    const [entry] = await rowsOf<{ id: string }>(db, sql`select id from dead_letters where dag_id = ${dagId}`);
    return { dagId, entryId: entry!.id, taskId: held!.id };
  }
  const taskOf = async (taskId: string) => (await rowsOf<{ status: string; priority: number; spec: { prompt: string; input: unknown } }>(db, sql`
    select status, priority, spec from tasks where id = ${taskId}`))[0]!;

  it('--edit opens $EDITOR on the task\'s fields; what the person changed is applied, and the task is READY again', async () => {
    const other = await deadLetter('edit-in-editor-other');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-editor-'));
    // An "editor" that shortens the prompt and raises the priority, as a person would in vi.
    const editor = path.join(dir, 'editor.mjs');
    writeFileSync(editor, "import { readFileSync, writeFileSync } from 'node:fs';\nconst f = process.argv[2];\n"
      + "writeFileSync(f, readFileSync(f, 'utf8').replace('summarise the report', 'summarise the report in 100 words').replace('priority: 50', 'priority: 10'));\n");
    const second = await deadLetter('edit-in-editor');
    const ok = await cliWith({ ...env, EDITOR: `${process.execPath} ${editor}` })('dlq', 'retry', second.entryId, '--edit', '--note', 'shorter');
    expect([ok.code, ok.stderr]).toEqual([0, '']);
    expect(ok.stdout).toMatch(/edited and retried; task .* is ready again/);
    expect(await taskOf(second.taskId)).toMatchObject({ status: 'ready', priority: 10, spec: { prompt: 'summarise the report in 100 words', input: { pages: 3 } } });
    // Only the dead letter named changed.
    expect(await taskOf(other.taskId)).toMatchObject({ status: 'dead_lettered', priority: 50 });
  });

  it('an editor that changes nothing, or fails, retries nothing; --patch applies a file of fields; a bad field is exit 2 naming it', async () => {
    const { entryId, taskId } = await deadLetter('edit-patch');
    const before = await databaseSnapshot(db);
    const unchanged = await cliWith({ ...env, EDITOR: 'true' })('dlq', 'retry', entryId, '--edit');
    expect([unchanged.code, unchanged.stderr]).toEqual([2, expect.stringMatching(/the edit changed nothing; nothing was retried/)]);
    const failing = await cliWith({ ...env, EDITOR: 'false' })('dlq', 'retry', entryId, '--edit');
    expect([failing.code, failing.stderr]).toEqual([2, expect.stringMatching(/the editor \(false\) exited 1; nothing was retried/)]);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-patch-'));
    writeFileSync(path.join(dir, 'bad.yaml'), 'priority: 500\n');
    const bad = await cli('dlq', 'retry', entryId, '--patch', path.join(dir, 'bad.yaml'));
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringMatching(/edit\.priority: .*100/)]);
    const both = await cli('dlq', 'retry', entryId, '--edit', '--patch', path.join(dir, 'bad.yaml'));
    expect(both.code).toBe(2);
    expect(await databaseSnapshot(db)).toBe(before);

    writeFileSync(path.join(dir, 'good.json'), JSON.stringify({ input: { pages: 1 }, max_attempts: 2 }));
    const good = await cli('dlq', 'retry', entryId, '--patch', path.join(dir, 'good.json'), '--json');
    expect(good.code, good.stderr).toBe(0);
    expect(good.json()).toMatchObject({ id: entryId, taskStatus: 'ready' });
    expect(await taskOf(taskId)).toMatchObject({ status: 'ready', priority: 50, spec: { prompt: 'summarise the report', input: { pages: 1 } } });
  });
});
