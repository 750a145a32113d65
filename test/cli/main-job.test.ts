import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { cliWith } from '../helpers/cli.js';
import { eventually } from '../helpers/wait.js';
import { main } from '../../src/cli/main.js';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { taskFail } from '../../src/engine/attempt/fail.js';

const database = await testDatabase();
const { db } = database;
const env = { ...process.env, DATABASE_URL: database.url };

const cli = cliWith(env);
/** The main job's agents under one instance label, as on one machine. */
const mainJob = cliWith({ ...env, DAGENT_AGENT_INSTANCE: 'mainjob' });

/** A small repository to audit: two folders with known contents. */
function repoFixture(): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'dagent-audit-'));
  mkdirSync(path.join(root, 'lib'));
  mkdirSync(path.join(root, 'notes'));
  mkdirSync(path.join(root, 'node_modules'));
  writeFileSync(path.join(root, 'lib', 'a.ts'), 'one\ntwo\n// TODO: three\n');
  writeFileSync(path.join(root, 'lib', 'b.ts'), 'four\n');
  writeFileSync(path.join(root, 'notes', 'n.md'), 'FIXME\n');
  return root;
}

describe('the main job (dagent demo, behind npm start)', () => {
  it('audits a repository: one spawned subtask per folder, a report, live lines and a summary', async () => {
    const root = repoFixture();
    const r = await mainJob('demo', '--param', `root=${root}`, '--param', `report_dir=${path.join(root, '.reports')}`);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    // Lines show transitions as polled: a fast run may skip straight to completed, but never goes silent.
    expect(r.stdout).toMatch(/✔ survey\s+completed on repo-audit-mainjob\b/);
    expect(r.stdout).toMatch(/survey\/dir-lib\s+\w+.*\(spawned\)/);
    expect(r.stdout).toMatch(/✔ report\s+completed on synthesize-mainjob\b/);
    // The report counts as done only after its test step passed, run by the validate-test agent.
    expect(r.stdout).toMatch(/✔ report\/validate-3@1\s+completed on validate-test-mainjob\b/);
    expect(r.stdout).toMatch(/tasks completed 5\/5, retries 0, dead letters 0, cost \$0\.0000, wall time [\d.]+s/);
    const report = /report: (.+\.md)/.exec(r.stdout)![1]!;
    const markdown = readFileSync(path.resolve(report), 'utf8');
    expect(markdown).toContain(`# Repository audit: ${root}`);
    expect(markdown).toMatch(/\| lib\/ \| lib\/a\.ts \| \d+ \| 2 \| 4 \| 1 \|/);
    expect(markdown).toMatch(/\| notes\/ \| notes\/n\.md \| \d+ \| 1 \| 1 \| 1 \|/);
    expect(markdown).not.toContain('node_modules');
    const kids = (await db.execute(sql`select key, parent_id is not null as spawned from tasks where key like 'survey/%' order by key`)).rows;
    expect(kids).toEqual([{ key: 'survey/dir-lib', spawned: true }, { key: 'survey/dir-notes', spawned: true }]);
    const verdicts = (await db.execute(sql`
      select v->>'kind' as kind, (v->>'pass')::boolean as pass from attempts a join tasks t on t.id = a.task_id, jsonb_array_elements(a.details->'verdicts') v
      where t.key = 'report' and t.dag_id = ${/DAG (dag_\w+): completed/.exec(r.stdout)![1]!}`)).rows;
    expect(verdicts).toEqual([{ kind: 'json-schema', pass: true }, { kind: 'regex', pass: true }, { kind: 'test', pass: true }]);
  });

  it('--json prints the summary only; a second run finds the same agents again', async () => {
    // An instance label of this test's own, so what other tests ran does not count.
    const rerun = cliWith({ ...env, DAGENT_AGENT_INSTANCE: 'rerun' });
    for (let run = 0; run < 2; run++) {
      const root = repoFixture();
      const r = await rerun('demo', '--json', '--param', `root=${root}`, '--param', `report_dir=${path.join(root, '.reports')}`);
      expect(r.code, r.stderr).toBe(0);
      const s = JSON.parse(r.stdout);
      expect(s).toMatchObject({ status: 'completed', completed: 5, tasks: 5, retries: 0, deadLetters: 0 });
      expect(existsSync(s.report)).toBe(true);
    }
    // Both runs went to the same four agent rows, and each row that worked has both DAGs' attempts.
    const agents = (await db.execute(sql`
      select a.id, count(distinct t.dag_id)::int as dags from agents a left join attempts t on t.agent_id = a.id
      where a.id like '%-rerun%' group by a.id order by a.id`)).rows;
    expect(agents).toEqual([
      { id: 'repo-audit-rerun', dags: 2 }, { id: 'shell-rerun', dags: 2 }, { id: 'synthesize-rerun', dags: 2 }, { id: 'validate-test-rerun', dags: 2 },
    ]);
  });
});

describe('the main job\'s exit code', () => {
  it('a DAG that ends blocked (a dead letter) is exit 1, saying which task and why; --json still prints the summary', async () => {
    const r = await cli('demo', 'test/fixtures/dags/doomed.yaml');
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/DAG dag_\w+: blocked \(task broken dead-lettered: /);
    expect(r.stderr).toMatch(/^error: DAG dag_\w+ is blocked: task broken dead-lettered: /m);
    const j = await cli('demo', '--json', 'test/fixtures/dags/doomed.yaml');
    expect(j.code).toBe(1);
    expect(JSON.parse(j.stdout)).toMatchObject({ error: { code: 'DAG_NOT_COMPLETED', status: 'blocked', summary: { status: 'blocked', deadLetters: 1 } } });
  });
});

describe('dagent watch', () => {
  it('prints each transition until the DAG completes, exit 0', async () => {
    const dagId = await dagCreate(db, 'name: watched\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');
    await agentCreate(db, 'watch-agent');
    // The output as it comes, so each task moves only once the watch has shown the one before.
    let stdout = '';
    const watching = main(['watch', dagId, '--interval-ms', '20'], { stdout: (s) => { stdout += s; }, stderr: () => {}, env })
      .then((code) => ({ code, stdout }));
    for (const [key, shown] of [['a', /a\s+ready/], ['b', /b\s+ready/]] as const) {
      await eventually(`the watch shows ${key} ready`, async () => shown.test(stdout));
      const [t] = await taskClaim(db, 'watch-agent', { dagId });
      expect(t!.key).toBe(key);
      await taskComplete(db, { taskId: t!.id, fence: t!.fence, output: key });
    }
    const r = await watching;
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/\[0\/2\] · a\s+ready/);
    expect(r.stdout).toMatch(/✔ b\s+completed on watch-agent/);
    expect(r.stdout).toContain(`DAG ${dagId} completed`);
    // Not a terminal: the status line is a plain line, the first at once and the last at the end.
    const statuses = r.stdout.split('\n').filter((l) => / done · /.test(l));
    expect(statuses[0]).toMatch(/^0\/2 done · 0 running · 0 retrying · 0 dead-lettered · \$0\.0000 · \d+s$/);
    expect(statuses.at(-1)).toMatch(/^2\/2 done · 0 running · 0 retrying · 0 dead-lettered · \$0\.0000 · \d+s$/);
  });

  it('exits 1 with the reason when the DAG blocks on a dead letter', async () => {
    const dagId = await dagCreate(db, 'name: doomed\ntasks:\n  a: { type: t, max_attempts: 1 }\n');
    await agentCreate(db, 'watch-agent-2');
    const [t] = await taskClaim(db, 'watch-agent-2', { dagId });
    await taskFail(db, { taskId: t!.id, fence: t!.fence, errorClass: 'crash', message: 'gone' });
    const r = await cli('watch', dagId);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/☠ a\s+dead_lettered: gone/);
    expect(r.stderr).toMatch(/DAG .* is blocked: task a dead-lettered: attempts exhausted/);
  });
});

describe('dagent submit --wait', () => {
  it('follows each DAG it created until it ends: exit 0 when all complete, 1 with the reason when one blocks', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-wait-'));
    writeFileSync(path.join(dir, 'ok.yaml'), 'name: waited\ntasks:\n  a: { type: wait-ok }\n');
    writeFileSync(path.join(dir, 'doomed.yaml'), 'name: waited-doomed\ntasks:\n  a: { type: wait-doomed, max_attempts: 1 }\n');
    await agentCreate(db, 'wait-agent');
    // A stand-in agent: completes the first DAG's task, fails the second's.
    const work = (async () => {
      for (let done = 0; done < 2;) {
        const [t] = await taskClaim(db, 'wait-agent', { limit: 1 });
        if (!t) { await new Promise((r) => setTimeout(r, 30)); continue; }
        if (t.type === 'wait-ok') await taskComplete(db, { taskId: t.id, fence: t.fence, output: 'fine' });
        else await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'crash', message: 'gone' });
        done++;
      }
    })();
    const ok = await cli('submit', path.join(dir, 'ok.yaml'), '--wait');
    expect([ok.code, ok.stderr]).toEqual([0, '']);
    expect(ok.stdout).toMatch(/^dag_\w+: following it until it ends/m);
    expect(ok.stdout).toMatch(/✔ a\s+completed on wait-agent/);
    expect(ok.stdout).toMatch(/^1\/1 done · 0 running · 0 retrying · 0 dead-lettered/m);
    expect(ok.stdout).toContain('1 DAG(s) completed');
    const doomed = await cli('submit', path.join(dir, 'doomed.yaml'), '--wait', '--json');
    await work;
    expect(doomed.code).toBe(1);
    expect(JSON.parse(doomed.stdout)).toMatchObject({ error: { code: 'DAG_NOT_COMPLETED', status: 'blocked', results: [{ created: true, status: 'blocked' }] } });
  });
});

describe('dagent agent run: bad input', () => {
  it('names the file when it is missing or is not an agent, exit 2', async () => {
    const missing = await cli('agent', 'run', 'agents/nope.ts');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('agents/nope.ts: no such agent file');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-agent-'));
    writeFileSync(path.join(dir, 'not-agent.mjs'), 'export default { hello: 1 };\n');
    const notAgent = await cli('agent', 'run', path.join(dir, 'not-agent.mjs'));
    expect(notAgent.code).toBe(2);
    expect(notAgent.stderr).toMatch(/not-agent\.mjs: the default export is not an agent/);
  });
});
