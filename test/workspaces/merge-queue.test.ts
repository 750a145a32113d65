import { chmodSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import coding from '../../agents/coding.js';
import merge from '../../agents/merge.js';
import { dagFileLoad, dagSourceLoad } from '../../src/dag/load.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import { subtaskSpecsParse } from '../../src/dag/subtask-spec.js';
import { mergeQueueRun } from '../../src/runtime/merge-queue.js';
import type { ClaimedTask, TaskContext } from '../../src/index.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { mapTasksSettle } from '../../src/engine/dag/map.js';
import { repoKeyOf, workspaceEntries } from '../../src/workspaces/layout.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';
import { testDatabase } from '../helpers/db.js';
import { leaseLapsedReaped, rowsOf } from '../helpers/factories.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { agentRunners } from '../helpers/runners.js';
import { envKept } from '../helpers/env.js';
import { eventually } from '../helpers/wait.js';
import { gitIn, repoMake, scratchDir, scriptMake } from '../helpers/git-repos.js';

const database = await testDatabase();
const { db } = database;
const scratch = scratchDir('dagent-merge-');
const root = path.join(scratch, 'workspaces');
const spawnAgent = agentProcesses(database.url);
const { run } = agentRunners(database, { workspaces: { root, keptSec: 3600 } });
const env = envKept(['DAGENT_CODING_COMMAND', 'DAGENT_WORKSPACE_ROOT']);

/**
 * The stand-in for a coding CLI (what `claude -p` or `codex exec` would be): it reads the task from the file the
 * coding agent names, writes `input.line` into `input.file` (one line replaced at `input.at`, else a new file), and
 * for a resolver, replaces each conflicted file's markers with both sides' lines. It logs what it was asked on stdin.
 */
const EDITOR = scriptMake(path.join(scratch, 'editor.sh'), `
cat > "$(dirname "$0")/stdin-$$.txt"
exec node -e '
const fs = require("fs");
const t = JSON.parse(fs.readFileSync(process.env.DAGENT_TASK_FILE, "utf8"));
const c = t.input.conflict;
if (c) {
  for (const f of c.files) {
    const text = fs.readFileSync(f, "utf8");
    fs.writeFileSync(f, text.split("\\n").filter((l) => !/^(<{7}|={7}|>{7})/.test(l)).join("\\n"));
  }
} else if (t.input.item) {
  fs.writeFileSync(t.input.item.file, t.input.item.instruction + "\\n");
} else if (t.input.at !== undefined) {
  const lines = fs.readFileSync(t.input.file, "utf8").split("\\n");
  lines[t.input.at] = t.input.line;
  fs.writeFileSync(t.input.file, lines.join("\\n"));
} else {
  fs.writeFileSync(t.input.file, t.input.line + "\\n");
}
'`);

/** The coding agent run in this process drives the stand-in CLI (an agent process gets it in its environment). */
function editorInProcess(): void {
  env.clear();
  process.env.DAGENT_CODING_COMMAND = EDITOR;
}

async function submit(yaml: string): Promise<string> {
  const [r] = await dagSubmit(db, [await dagSourceLoad(yaml, 'merge.yaml', { baseDir: scratch, roots: [scratch] })]);
  return r!.dagId;
}

const tasksOf = (dagId: string) => rowsOf<{ key: string; status: string; origin: string; output: Record<string, unknown> | null; spec: { input: Record<string, unknown> } }>(db, sql`
  select key, status, origin, output, spec from tasks where dag_id = ${dagId} and validates_id is null order by key`);

interface MergeOutput { into: string; head: string; landed: string[]; notLanded: Array<{ key: string; result: string; resolvedBy?: string }>; queue: Array<{ key: string; result: string; files?: string[]; tested?: boolean }> }

describe('the merge queue', () => {
  it('six edits in parallel worktrees, four on their own files and two on the same line: five land, the sixth lands through a resolver task', async () => {
    const repo = repoMake(path.join(scratch, 'six'), { 'shared.txt': 'one\ntwo\nthree\n', 'check.sh': '#!/bin/sh\n! grep -rq "^<<<<<<<" --exclude-dir=.git .\n' });
    chmodSync(path.join(repo, 'check.sh'), 0o755);
    gitIn(repo, 'commit', '--quiet', '-am', 'check.sh executable');
    const testRuns = path.join(scratch, 'six-test-runs.txt');
    const edit = (file: string, line: string, at?: number) => `{ type: edit, spec: { constraints: { capabilities: [coding] }, prompt: "Edit ${file}", input: { file: ${file}, line: "${line}"${at === undefined ? '' : `, at: ${at}`} } } }`;
    const dagId = await submit(`
name: six-edits
defaults:
  workspace: { repo: six, base: main }
spawn:
  templates:
    resolve:
      type: resolve
      spec: { prompt: "Resolve the conflict: keep both sides.", constraints: { capabilities: [coding] } }
      workspace: { repo: six, base: main }
      accepts: [conflict]
tasks:
  api: ${edit('api.txt', 'api')}
  cli: ${edit('cli.txt', 'cli')}
  docs: ${edit('docs.txt', 'docs')}
  web: ${edit('web.txt', 'web')}
  left: ${edit('shared.txt', 'TWO from left', 1)}
  right: ${edit('shared.txt', 'TWO from right', 1)}
  land:
    type: merge
    depends_on: [api, cli, docs, web, left, right]
    merge: { into: main, resolver: resolve, test: { command: "echo run >> ${testRuns} && ./check.sh" } }
`);
    const workers = { DAGENT_WORKSPACE_ROOT: root };
    const coder = await spawnAgent('agents/coding.ts', 'coder', ['--concurrency', '6'], { env: { ...workers, DAGENT_CODING_COMMAND: EDITOR } });
    const merger = await spawnAgent('agents/merge.ts', 'merger', [], { env: workers });
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed', 150_000);

    const tasks = await tasksOf(dagId);
    const land = tasks.find((t) => t.key === 'land')!.output as unknown as MergeOutput;
    expect(land.landed).toEqual(['api', 'cli', 'docs', 'web', 'left', 'land/resolve-right']);
    expect(land.notLanded).toEqual([{ key: 'right', result: 'conflict', resolvedBy: 'land/resolve-right' }]);
    expect(land.queue.find((q) => q.key === 'right')).toMatchObject({ result: 'conflict', files: ['shared.txt'] });
    // The target is the repository's checked-out branch: its working tree moved with it.
    expect(gitIn(repo, 'rev-parse', 'main')).toBe(land.head);
    expect(gitIn(repo, 'status', '--porcelain')).toBe('');
    for (const f of ['api', 'cli', 'docs', 'web']) expect(readFileSync(path.join(repo, `${f}.txt`), 'utf8')).toBe(`${f}\n`);
    expect(readFileSync(path.join(repo, 'shared.txt'), 'utf8').split('\n')).toEqual(['one', 'TWO from left', 'TWO from right', 'three', '']);
    // Each of the six landings ran the test in its merged tree first; the conflict ran none.
    expect(readFileSync(testRuns, 'utf8').trim().split('\n')).toHaveLength(6);

    // The resolver: a subtask of the author's template, given both sides as data, which merged the branch in its worktree.
    const resolver = tasks.find((t) => t.key === 'land/resolve-right')!;
    expect(resolver).toMatchObject({ status: 'completed', origin: 'template' });
    const conflict = resolver.spec.input.conflict as { branch: string; files: string[]; diffs: { into: string; branch: string } };
    expect(conflict.branch).toBe(`dagent/${dagId}/right`);
    expect(conflict.files).toEqual(['shared.txt']);
    expect(conflict.diffs.into).toContain('+TWO from left');
    expect(conflict.diffs.branch).toContain('+TWO from right');
    expect(gitIn(repo, 'merge-base', '--is-ancestor', `dagent/${dagId}/right`, 'main')).toBe('');
    // The edits' outputs carry their diffs; the coding CLI got the task on standard input, never on its command line.
    expect((tasks.find((t) => t.key === 'api')!.output as { diff: string }).diff).toContain('+api');

    coder.child.kill('SIGTERM');
    merger.child.kill('SIGTERM');
    expect(await coder.exited).toBe(0);
    expect(await merger.exited).toBe(0);
    expect(await workspaceEntries(root)).toEqual([]);
    expect(gitIn(repo, 'worktree', 'list', '--porcelain').split('\n').filter((l) => l.startsWith('worktree '))).toHaveLength(1);
  }, 180_000); // Six coding-agent runs, six merges and their tests, in real processes: a saturated CI machine took over 60 s.

  it('a branch whose merge fails the test does not move the target; the next one lands', async () => {
    const repo = repoMake(path.join(scratch, 'tested'), { 'a.txt': 'base\n' });
    // The target is not checked out anywhere: it moves by compare-and-swap of the ref.
    gitIn(repo, 'checkout', '--quiet', '--detach');
    const before = gitIn(repo, 'rev-parse', 'main');
    editorInProcess();
    const dagId = await submit(`
name: tested
defaults:
  workspace: { repo: tested }
tasks:
  bad: { type: edit, spec: { constraints: { capabilities: [coding] }, input: { file: broken.txt, line: "oops" } } }
  good: { type: edit, depends_on: [bad], spec: { constraints: { capabilities: [coding] }, input: { file: fine.txt, line: "fine" } } }
  land:
    type: merge
    depends_on: [bad, good]
    merge: { into: main, test: { command: "test ! -e broken.txt || { echo 'broken.txt must not exist' >&2; exit 3; }" } }
`);
    await run(coding);
    await run(merge);
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    const land = (await tasksOf(dagId)).find((t) => t.key === 'land')!.output as unknown as MergeOutput & { queue: Array<{ test?: { exitCode: number; outputTail: string } }> };
    expect(land.landed).toEqual(['good']);
    expect(land.notLanded).toEqual([{ key: 'bad', result: 'tests_failed' }]);
    expect(land.queue[0]).toMatchObject({ key: 'bad', result: 'tests_failed', test: { exitCode: 3, outputTail: expect.stringContaining('broken.txt must not exist') } });
    const main = gitIn(repo, 'rev-parse', 'main');
    expect(main).toBe(land.head);
    expect(gitIn(repo, 'rev-parse', `${main}^1`)).toBe(before);
    expect(gitIn(repo, 'ls-tree', '--name-only', 'main').split('\n').sort()).toEqual(['a.txt', 'fine.txt']);
    expect(existsSync(path.join(root))).toBe(true);
  });

  it('refuses at submit, naming the field, a queue that could not land what it names', async () => {
    repoMake(path.join(scratch, 'refusals'));
    const refused = async (yaml: string) => dagSourceLoad(yaml, 'bad.yaml', { baseDir: scratch, roots: [scratch] }).then(() => 'accepted', (e: Error) => e.message);
    const head = 'name: bad\ndefaults:\n  workspace: { repo: refusals }\ntasks:\n';
    const edit = '  e: { type: edit, spec: { constraints: { capabilities: [coding] } } }\n';
    expect(await refused(`${head}${edit}  m: { type: merge, merge: { into: main, tasks: [e] } }\n`))
      .toMatch(/tasks\.m\.merge\.tasks\[0\].*"e" is not in depends_on of "m"/s);
    expect(await refused(`${head}${edit}  m: { type: merge, depends_on: [e], merge: { into: main, resolver: fix } }\n`))
      .toMatch(/tasks\.m\.merge\.resolver.*"fix" is not a template/s);
    expect(await refused(`spawn: { templates: { fix: { type: fix, workspace: { repo: refusals } } } }\n${head}${edit}  m: { type: merge, depends_on: [e], merge: { into: main, resolver: fix } }\n`))
      .toMatch(/tasks\.m\.merge\.resolver.*must have workspace\.base main/s);
    expect(await refused(`spawn: { templates: { fix: { type: fix, workspace: { repo: refusals, base: main } } } }\n${head}${edit}  m: { type: merge, depends_on: [e], merge: { into: main, resolver: fix } }\n`))
      .toMatch(/must accept the input field conflict/);
    expect(await refused(`name: bad\ntasks:\n${edit}  m: { type: merge, depends_on: [e], merge: { into: main } }\n`))
      .toMatch(/tasks\.m\.merge.*names no repo/s);
    expect(await refused(`${head}${edit}  m: { type: merge, depends_on: [e], merge: { into: main, repo: "https://example.com/x.git" } }\n`))
      .toMatch(/tasks\.m\.merge\.repo.*is a URL/s);
    expect(await refused(`${head}${edit}  m: { type: merge, depends_on: [e], merge: { into: "-main" } }\n`))
      .toMatch(/tasks\.m\.merge\.into/);
    // By default it lands the upstream tasks that work in its repository: not a task that waits, not one elsewhere.
    repoMake(path.join(scratch, 'elsewhere'));
    const spec = await dagSourceLoad(`${head}${edit}  o: { type: edit, workspace: { repo: elsewhere } }\n  w: { type: w, wait_for: { signal: go } }\n  m: { type: merge, depends_on: [e, o, w], merge: { into: main } }\n`, 'ok.yaml', { baseDir: scratch, roots: [scratch] });
    expect(spec.tasks.find((t) => t.key === 'm')!.body.merge!.tasks).toEqual([{ key: 'e', forEach: false }]);
  });
});

describe('the merge queue under a crash', () => {
  it('kill -9 of the merge agent mid-test: the next attempt replays the landed branch (not tested again), removes the dead test worktree, and lands the rest once', async () => {
    const repo = repoMake(path.join(scratch, 'crashed'), { 'a.txt': 'base\n' });
    gitIn(repo, 'checkout', '--quiet', '--detach');
    const runs = path.join(scratch, 'crashed-test-runs.txt');
    const hung = path.join(scratch, 'crashed-hung');
    // The test hangs the first time it sees b's work (the merge agent is killed there); else it logs a run and passes.
    const test = `if [ -e b.txt ] && [ ! -e ${hung} ]; then touch ${hung}; sleep 60; fi; echo run >> ${runs}`;
    editorInProcess();
    const dagId = await submit(`
name: crashed
defaults:
  workspace: { repo: crashed }
tasks:
  a: { type: edit, spec: { constraints: { capabilities: [coding] }, input: { file: a.txt, line: "a" } } }
  b: { type: edit, spec: { constraints: { capabilities: [coding] }, input: { file: b.txt, line: "b" } } }
  land:
    type: merge
    depends_on: [a, b]
    retry: { strategy: immediate }
    merge: { into: main, test: { command: "${test}" } }
`);
    await run(coding, { concurrency: 2 });
    const workers = { DAGENT_WORKSPACE_ROOT: root };
    const victim = await spawnAgent('agents/merge.ts', 'merge-victim', [], { env: workers });
    await eventually('the test hanging on b', async () => existsSync(hung), 30_000);
    const afterA = gitIn(repo, 'rev-parse', 'main');
    expect(gitIn(repo, 'show', 'main:a.txt')).toBe('a');
    victim.child.kill('SIGKILL');
    await victim.exited;
    await leaseLapsedReaped(db, reaperCreate({ db }), 'merge-victim');
    // The dead attempt's test worktree is still there; the target has a's work only.
    const leftover = path.join(root, repoKeyOf(repo), 'merge');
    expect(readdirSync(leftover)).toHaveLength(1);

    const rescuer = await spawnAgent('agents/merge.ts', 'merge-rescuer', [], { env: workers });
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed', 30_000);
    const land = (await tasksOf(dagId)).find((t) => t.key === 'land')!.output as unknown as MergeOutput;
    expect(land.landed).toEqual(['a', 'b']);
    // a's landing was replayed from its step: tested once in all; b's tested again and landed on top of a's.
    expect(readFileSync(runs, 'utf8').trim().split('\n')).toHaveLength(2);
    expect(gitIn(repo, 'rev-parse', 'main^1')).toBe(afterA);
    expect(gitIn(repo, 'show', 'main:b.txt')).toBe('b');
    const attempts = await rowsOf<{ outcome: string; error_class: string | null }>(db, sql`
      select a.outcome, a.error_class from attempts a join tasks t on t.id = a.task_id where t.dag_id = ${dagId} and t.key = 'land' order by a.fence`);
    expect(attempts).toEqual([{ outcome: 'failed', error_class: 'crash' }, { outcome: 'completed', error_class: null }]);
    expect(readdirSync(leftover)).toEqual([]);
    expect(gitIn(repo, 'worktree', 'list', '--porcelain').split('\n').filter((l) => l.startsWith('worktree '))).toHaveLength(1);
    rescuer.child.kill('SIGTERM');
    expect(await rescuer.exited).toBe(0);
  });
});

describe('dags/examples/coding-fleet.yaml', () => {
  it('runs: a plan of three edits, each in its own worktree by the coding agent, landed by the merge queue, then reviewed', async () => {
    const repo = repoMake(path.join(scratch, 'fleet'), { 'README.md': 'fleet\n' });
    editorInProcess();
    const edits = [{ file: 'api.txt', instruction: 'validate input' }, { file: 'cli.txt', instruction: 'add a flag' }, { file: 'README.md', instruction: 'document it' }];
    const spec = await dagFileLoad('dags/examples/coding-fleet.yaml', { params: { repo, goal: 'Validate input', test: 'test -s api.txt' }, roots: [scratch] });
    const [submitted] = await dagSubmit(db, [spec]);
    const dagId = submitted!.dagId;
    // The plan and the review are the llm agent's in the example; a scripted model stands in for it here.
    const model = defineAgent({ name: 'model', capabilities: ['llm'], models: ['*'], run: async (task) => (task.key === 'plan' ? { edits } : { review: 'all three landed', landed: (task.inputs.land as MergeOutput).landed }) });
    await run(model);
    await run(coding, { concurrency: 3 });
    await run(merge);
    // The waits loop maps the for_each once the plan is done, and completes it once its children are (a test drives it).
    await eventually('DAG completed', async () => {
      await mapTasksSettle(db, { batch: 10 });
      return (await dagGet(db, dagId))?.status === 'completed';
    }, 30_000);
    const tasks = await tasksOf(dagId);
    const land = tasks.find((t) => t.key === 'land')!.output as unknown as MergeOutput;
    expect(land.landed).toEqual(['edit/0', 'edit/1', 'edit/2']);
    expect(tasks.find((t) => t.key === 'review')!.output).toEqual({ review: 'all three landed', landed: ['edit/0', 'edit/1', 'edit/2'] });
    expect(gitIn(repo, 'show', 'main:api.txt')).toBe('validate input');
    expect(gitIn(repo, 'show', 'main:README.md')).toBe('document it');
    expect(gitIn(repo, 'show', 'main:cli.txt')).toBe('add a flag');
  });
});

describe('the merge queue\'s trust boundary', () => {
  it('an agent cannot spawn a merge queue, and mergeQueueRun lands nothing for a spec an agent wrote', async () => {
    const context = { priority: 50, policy: { templates: {}, freeForm: true }, parent: { requiredCapabilities: [], models: [], fallbackModels: [], maxCostUsd: null, maxDurationSec: null, heartbeatSec: null, concurrency: null } };
    await expect(subtaskSpecsParse([{ key: 'm', type: 'merge', merge: { into: 'main' } }], context)).rejects.toThrow(/merge/);
    const task = { key: 'm', origin: 'agent', spec: { input: {}, merge: { repo: scratch, into: 'main', tasks: [] } } } as unknown as ClaimedTask;
    await expect(mergeQueueRun(task, {} as TaskContext)).rejects.toMatchObject({ errorClass: 'untrusted_spec' });
  });
});
