import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { dagSourceLoad } from '../../src/dag/load.js';
import { subtaskSpecsParse } from '../../src/dag/subtask-spec.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import { workspaceBranch } from '../../src/workspaces/layout.js';
import { testDatabase } from '../helpers/db.js';
import { rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';
import { repoMake, scratchDir } from '../helpers/git-repos.js';

const database = await testDatabase();
const { db } = database;
const scratch = scratchDir();
const project = path.join(scratch, 'project');
mkdirSync(project);
const repo = repoMake(path.join(project, 'repo'));
const outside = repoMake(path.join(scratch, 'outside'));
mkdirSync(path.join(project, 'plain'));
symlinkSync(outside, path.join(project, 'link'));
const root = path.join(scratch, 'workspaces');
const { run } = agentRunners(database, { workspaces: { root, keptSec: null } });

/** Load DAG YAML as a file in `project` (its only root) would be. */
const load = (yaml: string) => dagSourceLoad(yaml, 'dags/fix.yaml', { baseDir: project, roots: [] });
const task = (workspace: string) => `name: fix\ntasks:\n  fix:\n    type: edit\n    workspace: ${workspace}\n`;

describe('a workspace\'s repository is the DAG author\'s, checked like every path in a DAG', () => {
  it('is stored as the repository\'s real path, from the task, or from the DAG\'s defaults', async () => {
    const spec = await load(`name: fix\ndefaults:\n  workspace: { repo: repo, base: main }\ntasks:\n  a: { type: edit }\n  b: { type: edit, workspace: { repo: ./repo/, keep: on_failure } }\n  w: { type: wait, wait_for: { signal: go } }\n`);
    const byKey = Object.fromEntries(spec.tasks.map((t) => [t.key, t.body.workspace]));
    expect(byKey).toEqual({ a: { repo, base: 'main', keep: 'never' }, b: { repo, keep: 'on_failure' }, w: undefined });
  });

  it('as a URL, is accepted only when the operator\'s allow-list has it, and kept as written: each agent\'s machine checks its own list before it clones', async () => {
    const allowing = { baseDir: project, roots: [], repoUrls: ['https://git.example.com/team/', 'git@git.example.com:team/'] };
    const spec = await dagSourceLoad(task('{ repo: "https://git.example.com/team/app.git" }'), 'dags/fix.yaml', allowing);
    expect(spec.tasks[0]!.body.workspace).toEqual({ repo: 'https://git.example.com/team/app.git', keep: 'never' });
    expect((await dagSourceLoad(task('{ repo: "git@git.example.com:team/app.git" }'), 'dags/fix.yaml', allowing)).tasks[0]!.body.workspace!.repo).toBe('git@git.example.com:team/app.git');
    // Not on the list (another host, a prefix that only looks alike), or no list at all: refused at submission, naming the field.
    for (const [url, list] of [['https://evil.example.com/team/app.git', allowing.repoUrls], ['https://git.example.com/teamwork/app.git', ['https://git.example.com/team']], ['https://git.example.com/team/app.git', []]] as const) {
      await expect(dagSourceLoad(task(`{ repo: "${url}" }`), 'dags/fix.yaml', { ...allowing, repoUrls: list }))
        .rejects.toThrow(`tasks.fix.workspace.repo: ${url}: not a repository URL this dagent accepts (DAGENT_WORKSPACE_REPO_URLS allows ${list.length ? list.join(', ') : 'none'})`);
    }
  });

  it('in a group\'s template, is relative to the template\'s file and checked as its schema files are', async () => {
    mkdirSync(path.join(project, 'templates'), { recursive: true });
    writeFileSync(path.join(project, 'templates', 'fix.yaml'), 'tasks:\n  fix: { type: edit, workspace: { repo: ../repo } }\n');
    // As a schema_file there: inside the template's folder or a root (here the project, as DAGENT_FILE_ROOTS would allow).
    const spec = await dagSourceLoad('name: grouped\ntasks:\n  api: { use: templates/fix.yaml }\n', 'dags/fix.yaml', { baseDir: project, roots: [project] });
    expect(spec.tasks.map((t) => [t.key, t.body.workspace?.repo])).toEqual([['api/fix', repo]]);
  });

  it('is refused, naming the file, the line and the field, outside the DAG\'s directory and roots (symlinks followed), when not a repository, or as a URL of another kind', async () => {
    await expect(load(task(`{ repo: ${outside} }`))).rejects.toThrow(`dags/fix.yaml:5:24 tasks.fix.workspace.repo: ${outside} is outside the DAG's directory`);
    await expect(load(task('{ repo: link }'))).rejects.toThrow('tasks.fix.workspace.repo: link is outside the DAG\'s directory');
    await expect(load(task('{ repo: ../outside }'))).rejects.toThrow('tasks.fix.workspace.repo: ../outside is outside the DAG\'s directory');
    await expect(load(task('{ repo: plain }'))).rejects.toThrow('tasks.fix.workspace.repo: plain is not a git repository');
    await expect(load(task('{ repo: missing }'))).rejects.toThrow('tasks.fix.workspace.repo: missing not found');
    await expect(load(task('{ repo: "ftp://example.com/x.git" }'))).rejects.toThrow('tasks.fix.workspace.repo: ftp://example.com/x.git: not a repository URL dagent clones');
    await expect(load(task('{ repo: repo, base: "--upload-pack=x" }'))).rejects.toThrow('tasks.fix.workspace.base: must be a git ref or commit');
    await expect(load(task('{ repo: repo, kep: on_failure }'))).rejects.toThrow(/tasks\.fix\.workspace.*kep/);
    await expect(load('name: w\ntasks:\n  w: { type: wait, wait_for: { signal: go }, workspace: { repo: repo } }\n')).rejects.toThrow('a task with wait_for runs no agent: remove workspace');
  });

  it('reaches a template\'s subtasks as the template says; an agent\'s own subtask cannot name one', async () => {
    const spec = await load(`
name: fix
spawn:
  templates:
    fixer: { type: edit, workspace: { repo: repo }, accepts: [file] }
tasks:
  plan: { type: plan }
`);
    const context = { priority: 50, policy: spec.spawn!, parent: { requiredCapabilities: [], models: [], fallbackModels: [], maxCostUsd: null, maxDurationSec: null, heartbeatSec: null, concurrency: null } };
    const [child] = await subtaskSpecsParse([{ key: 'one', template: 'fixer', spec: { input: { file: 'a.txt' } } }], context);
    expect(child!.body.workspace).toEqual({ repo, keep: 'never' });
    await expect(subtaskSpecsParse([{ key: 'mine', type: 'edit', workspace: { repo: outside } } as never], context)).rejects.toThrow(/workspace/);
    await expect(subtaskSpecsParse([{ key: 'mine', type: 'edit', spec: { workspace: { repo: outside } } } as never], context)).rejects.toThrow(/workspace/);
  });

  it('a spec an agent wrote that names one anyway is refused by the runtime before the handler runs', async () => {
    const [r] = await dagSubmit(db, [{
      name: 'forged', params: {}, tasks: [{
        key: 'forged', type: 'edit', origin: 'agent', body: { context: [], models: [], fallbackModels: [], input: {}, workspace: { repo: outside, keep: 'never' } },
        requiredCapabilities: ['forge'], priority: 50, boostPerMinute: 0, dependsOn: [], maxAttempts: 1, retry: { strategy: 'immediate', initialDelaySec: 0, multiplier: 1, maxDelaySec: 0, jitter: 0, noRetryOn: [] }, tags: [],
      }],
    }]);
    let ran = false;
    await run(defineAgent({ name: 'forge', capabilities: ['forge'], run: async () => { ran = true; return {}; } }));
    await eventually('dead-lettered', async () => (await taskStatusByKey(db, r!.dagId)).forged === 'dead_lettered');
    const [a] = await rowsOf<{ error_class: string; error_message: string }>(db, sql`select error_class, error_message from attempts where dag_id = ${r!.dagId}`);
    expect(a).toEqual({ error_class: 'untrusted_spec', error_message: 'task forged was written by an agent (origin agent): only a DAG\'s author names a workspace\'s repository' });
    expect(ran).toBe(false);
  });

  it('branches are named from the DAG\'s id and the task\'s key, a group\'s or a subtask\'s `/` written `+`', () => {
    expect(workspaceBranch('dag_abc', 'fix')).toBe('dagent/dag_abc/fix');
    expect(workspaceBranch('dag_abc', 'review/lint')).toBe('dagent/dag_abc/review+lint');
    expect(() => workspaceBranch('dag_abc', 'x/../../y')).toThrow();
    expect(() => workspaceBranch('../x', 'fix')).toThrow();
  });
});
