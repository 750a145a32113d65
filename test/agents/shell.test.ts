import { execSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import shell from '../../agents/shell.js';
import repoAudit from '../../agents/repo-audit.js';
import synthesize from '../../agents/synthesize.js';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, drain, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';

const database = await testDatabase();
const { db } = database;
const { run } = agentRunners(database, { pollIntervalMs: 200 });
const rows = <T>(q: ReturnType<typeof sql>) => rowsOf<T>(db, q);

beforeEach(() => databaseReset(db));

async function outputOf(dagId: string, key: string): Promise<Record<string, unknown>> {
  const [t] = await rows<{ output: Record<string, unknown> }>(sql`select output from tasks where dag_id = ${dagId} and key = ${key}`);
  return t!.output;
}

describe('shell agent', () => {
  it('runs a command in its cwd with the task env (not dagent\'s), capturing exit code, stdout and stderr', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-shell-'));
    await run(shell);
    const dagId = await dagCreate(db, `
name: sh
tasks:
  echo:
    type: t
    spec:
      constraints: { capabilities: [shell] }
      input: { command: 'pwd; echo "$GREETING"; echo "db=[$DATABASE_URL]"; echo oops >&2', cwd: ${JSON.stringify(dir)}, env: { GREETING: hello } }
`);
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).echo === 'completed');
    const out = await outputOf(dagId, 'echo');
    expect(out).toMatchObject({ exitCode: 0, stdout: `${dir}\nhello\ndb=[]\n`, stderr: 'oops\n', cwd: dir });
  });

  it('fails a non-zero exit as command_failed with the output on the attempt, unless allowFailure', async () => {
    await run(shell);
    const dagId = await dagCreate(db, `
name: sh-fail
tasks:
  strict: { type: t, max_attempts: 1, spec: { constraints: { capabilities: [shell] }, input: { command: 'echo partial; echo broken >&2; exit 3' } } }
  lenient: { type: t, spec: { constraints: { capabilities: [shell] }, input: { command: 'exit 4', allowFailure: true } } }
`);
    await eventually('settled', async () => {
      const s = await taskStatusByKey(db, dagId);
      return s.strict === 'dead_lettered' && s.lenient === 'completed';
    });
    const [a] = await rows<{ error_class: string; error_message: string; details: { exitCode: number; stdout: string } }>(sql`
      select a.error_class, a.error_message, a.details from attempts a join tasks t on t.id = a.task_id where t.dag_id = ${dagId} and t.key = 'strict'`);
    expect(a).toMatchObject({ error_class: 'command_failed', details: { exitCode: 3, stdout: 'partial\n' } });
    expect(a!.error_message).toBe('exit 3: echo partial; echo broken >&2; exit 3\nbroken');
    expect(await outputOf(dagId, 'lenient')).toMatchObject({ exitCode: 4 });
  });

  it('kills the whole command on timeout (a pipeline, not just the shell) and fails it as timeout', async () => {
    const marker = `dagent-orphan-${Date.now()}`;
    await run(shell);
    const dagId = await dagCreate(db, `
name: sh-timeout
tasks:
  slow: { type: t, max_attempts: 1, spec: { constraints: { capabilities: [shell] }, input: { command: 'sleep 37 | cat; echo ${marker}', timeoutSec: 0.3 } } }
`);
    const started = Date.now();
    await eventually('timed out', async () => (await taskStatusByKey(db, dagId)).slow === 'dead_lettered');
    expect(Date.now() - started).toBeLessThan(10_000);
    const [a] = await rows<{ error_class: string }>(sql`select error_class from attempts where dag_id = ${dagId}`);
    expect(a!.error_class).toBe('timeout');
    expect(execSync(`ps -eo args | grep -c "[s]leep 37" || true`).toString().trim()).toBe('0');
  });

  it('stores output with NUL characters (replaced: jsonb cannot hold them) instead of failing the batch', async () => {
    await run(shell);
    const dagId = await dagCreate(db, `
name: sh-nul
tasks:
  binary: { type: t, spec: { constraints: { capabilities: [shell] }, input: { command: "printf 'a\\\\000b'" } } }
`);
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).binary === 'completed');
    expect((await outputOf(dagId, 'binary')).stdout).toBe('a\uFFFDb');
  });
});

describe('shell agent input fields', () => {
  it('refuses two input fields that would be the same environment variable, instead of letting one overwrite the other', async () => {
    await run(shell);
    const dagId = await dagCreate(db, `
name: sh-case
tasks:
  clash: { type: t, max_attempts: 1, spec: { constraints: { capabilities: [shell] }, input: { command: 'echo "$DAGENT_INPUT_NAME"', name: a, NAME: b } } }
`);
    await eventually('dead-lettered', async () => (await taskStatusByKey(db, dagId)).clash === 'dead_lettered');
    const [row] = await rows<{ last_error: string }>(sql`select last_error from tasks where dag_id = ${dagId} and key = 'clash'`);
    // In the order jsonb keeps keys, whichever that is.
    expect(row!.last_error).toMatch(/^spec\.input fields (name and NAME|NAME and name) would both be DAGENT_INPUT_NAME$/);
  });
});

describe('synthesize agent', () => {
  it('merges upstream outputs into a Markdown report file', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-report-'));
    await run(shell);
    await run(synthesize);
    const dagId = await dagCreate(db, `
name: report
tasks:
  facts: { type: t, spec: { constraints: { capabilities: [shell] }, input: { command: 'echo fact one' } } }
  write:
    type: t
    title: Weekly facts
    depends_on: [facts]
    spec: { context: [facts.stdout], constraints: { capabilities: [synthesize] }, input: { outputDir: ${JSON.stringify(dir)} } }
`);
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).write === 'completed');
    const out = await outputOf(dagId, 'write');
    expect(out.path).toBe(path.join(dir, `${dagId}-write.md`));
    expect(readFileSync(out.path as string, 'utf8')).toBe('# Weekly facts\n\n## facts.stdout\n\nfact one\n\n');
  });

  it('writes no file for a task an agent wrote (origin agent), and neither does repo-audit read a folder for one', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-report-'));
    await run(synthesize);
    await run(repoAudit);
    // What a free-form subtask under a synthesize or repo-audit parent would be: it inherits the capability.
    const dagId = await dagCreate(db, `
name: agent-written
tasks:
  gate: { type: t, spec: { constraints: { capabilities: [gatekeeping] } } }
  write: { type: t, max_attempts: 1, depends_on: [gate], spec: { context: [gate], constraints: { capabilities: [synthesize] }, input: { outputDir: ${JSON.stringify(path.join(dir, 'out'))} } } }
  audit: { type: t, max_attempts: 1, depends_on: [gate], spec: { constraints: { capabilities: [repo-audit] }, input: { root: /etc } } }
`);
    await db.execute(sql`update tasks set origin = 'agent' where dag_id = ${dagId} and key in ('write', 'audit')`);
    await agentCreate(db, 'gatekeeper', ['gatekeeping']);
    expect(await drain(db, 'gatekeeper')).toEqual(['gate']);
    await eventually('both dead-lettered', async () => {
      const s = await taskStatusByKey(db, dagId);
      return s.write === 'dead_lettered' && s.audit === 'dead_lettered';
    });
    const errors = await rows<{ key: string; last_error: string }>(sql`select key, last_error from tasks where dag_id = ${dagId} and key <> 'gate' order by key`);
    expect(errors.map((e) => e.key)).toEqual(['audit', 'write']);
    for (const e of errors) expect(e.last_error).toMatch(/written by an agent \(origin agent\)/);
    expect(existsSync(path.join(dir, 'out'))).toBe(false);
  });
});
