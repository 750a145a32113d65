import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliWith } from '../helpers/cli.js';
import { taskClaim } from '../../src/engine/claim.js';
import { taskComplete } from '../../src/engine/lifecycle.js';
import { taskFail } from '../../src/engine/failure.js';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, databaseSnapshot } from '../helpers/factories.js';

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

    const agentId = await agentCreate(db, 'cli-agent', ['llm']);
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

  it('refuses bad input with exit code 2 and writes nothing', async () => {
    const before = await databaseSnapshot(db);
    for (const argv of [
      ['status', 'dag_doesnotexist'],
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
