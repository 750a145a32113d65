import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import shell from '../../agents/shell.js';
import validateTest from '../../agents/validate-test.js';
import { dagSourceLoad } from '../../src/dag/load.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';
import { workspaceReclaimerCreate } from '../../src/maintenance/workspace-reclaimer.js';
import { repoKeyOf, workspaceEntries } from '../../src/workspaces/layout.js';
import { workspaceOpen } from '../../src/workspaces/workspace.js';
import { MetricsCollector } from '../../src/observability/metrics.js';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, leaseExpire, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';
import { gitIn, repoMake, scratchDir, scriptMake } from '../helpers/git-repos.js';

const database = await testDatabase();
const { db } = database;
const scratch = scratchDir();
const root = path.join(scratch, 'workspaces');
const KEPT_SEC = 3600;
const { run } = agentRunners(database, { workspaces: { root, keptSec: KEPT_SEC } });
const reclaimer = (now?: () => number) => workspaceReclaimerCreate({ db, root, keptSec: KEPT_SEC, now });

/** Submit DAG YAML whose paths start at `baseDir` (default the scratch folder, which is also the one file root). */
async function submit(yaml: string, baseDir = scratch): Promise<string> {
  // The server's operator accepts file URLs under the scratch folder; each agent's operator decides for its machine.
  const [r] = await dagSubmit(db, [await dagSourceLoad(yaml, 'ws.yaml', { baseDir, roots: [scratch], repoUrls: [`file://${scratch}/`] })]);
  return r!.dagId;
}

/** The DAG completed, and the agents are done with it (an attempt's worktree is reclaimed once its outcome is recorded). */
async function completed(dagId: string, ...agents: Array<{ running: number }>): Promise<void> {
  await eventually(`DAG ${dagId} completed`, async () => (await dagGet(db, dagId))?.status === 'completed' && agents.every((a) => a.running === 0));
}

interface WsOutput { cwd: string; workspace: { branch: string; head: string; baseCommit: string; diffStat: { files: number; insertions: number; deletions: number; changed: Array<{ path: string }> } } }

async function outputs(dagId: string): Promise<Record<string, WsOutput>> {
  const rows = await rowsOf<{ key: string; output: WsOutput }>(db, sql`select key, output from tasks where dag_id = ${dagId} and validates_id is null`);
  return Object.fromEntries(rows.map((r) => [r.key, r.output]));
}

/** The worktrees git knows of in `repo`, its main one included. */
const worktreesOf = (repo: string) => gitIn(repo, 'worktree', 'list', '--porcelain').split('\n').filter((l) => l.startsWith('worktree ')).length;

describe('a worktree per task', () => {
  it('tasks editing one repository run at once, each in its own worktree on its own branch, and none touches another\'s files or the checkout', async () => {
    const repo = repoMake(path.join(scratch, 'shared'));
    const base = gitIn(repo, 'rev-parse', 'main');
    const barrier = path.join(scratch, 'barrier');
    // The stand-in for a coding CLI: it edits a file every task edits and adds one of its own, then waits until all
    // four are editing at once (so they really ran side by side).
    const editor = scriptMake(path.join(scratch, 'edit.sh'), `
echo "$DAGENT_INPUT_NAME" >> a.txt
echo "made by $DAGENT_INPUT_NAME" > "$DAGENT_INPUT_NAME.txt"
mkdir -p "$BARRIER" && touch "$BARRIER/$DAGENT_INPUT_NAME"
i=0
while [ "$(ls "$BARRIER" | wc -l)" -lt 4 ]; do i=$((i+1)); [ $i -lt 400 ] || exit 3; sleep 0.05; done`);
    const tasks = [1, 2, 3, 4].map((i) => `  t${i}: { type: edit, spec: { constraints: { capabilities: [shell] }, input: { command: "${editor}", env: { BARRIER: "${barrier}" }, name: t${i} } } }`);
    const dagId = await submit(`name: parallel\ndefaults:\n  workspace: { repo: shared }\ntasks:\n${tasks.join('\n')}\n`);
    const metrics = new MetricsCollector(db);
    const agent = await run(shell, { concurrency: 4 });
    await completed(dagId, agent);
    // This process's agents made four worktrees and committed four, each measured.
    const scraped = await metrics.metrics();
    metrics.close();
    expect(scraped).toContain('dagent_workspaces_total{result="made",error_class=""} 4');
    expect(scraped).toContain('dagent_workspaces_total{result="committed",error_class=""} 4');
    expect(scraped).toContain('dagent_workspace_disk_bytes_count 4');

    const out = await outputs(dagId);
    for (const i of [1, 2, 3, 4]) {
      const o = out[`t${i}`]!;
      const branch = `dagent/${dagId}/t${i}`;
      expect(o.workspace.branch).toBe(branch);
      expect(o.cwd.startsWith(root + path.sep)).toBe(true);
      expect(o.workspace.baseCommit).toBe(base);
      expect(o.workspace.head).toBe(gitIn(repo, 'rev-parse', branch));
      expect(o.workspace.diffStat).toMatchObject({ files: 2, insertions: 2, deletions: 0 });
      expect(o.workspace.diffStat.changed.map((c) => c.path).sort()).toEqual(['a.txt', `t${i}.txt`]);
      // Its branch holds its own edit of the shared file and its own file, none of the others'.
      expect(gitIn(repo, 'show', `${branch}:a.txt`)).toBe(`base\nt${i}`);
      expect(gitIn(repo, 'ls-tree', '-r', '--name-only', branch).split('\n').sort()).toEqual(['a.txt', 'src/lib.txt', `t${i}.txt`]);
      // What the attempt left uncommitted was committed by the runtime, on top of the base.
      expect(gitIn(repo, 'log', '-1', '--format=%an %P', branch)).toBe(`dagent ${base}`);
    }
    // The checkout the repository's owner works in is as it was.
    expect(gitIn(repo, 'status', '--porcelain')).toBe('');
    expect(gitIn(repo, 'rev-parse', 'HEAD')).toBe(base);
    expect(readFileSync(path.join(repo, 'a.txt'), 'utf8')).toBe('base\n');
    // Each worktree went with its completed attempt; the branches stay.
    expect(await workspaceEntries(root)).toEqual([]);
    expect(worktreesOf(repo)).toBe(1);
  });

  it('a test step runs in the worktree of the attempt it judges, which stays until the verdict and goes at the next reclaim', async () => {
    const repo = repoMake(path.join(scratch, 'tested'));
    // The DAG file as if it lay at the repository's root: the step's cwd (the file's folder) is the worktree's root.
    const dagId = await submit(`
name: tested
tasks:
  make:
    type: edit
    workspace: { repo: . }
    spec: { constraints: { capabilities: [shell] }, input: { command: "echo made > made.txt" } }
    output:
      validation: { kind: test, command: "grep -q made made.txt" }
`, repo);
    const maker = await run(shell);
    await eventually('output under validation, the attempt over', async () => (await taskStatusByKey(db, dagId)).make === 'validating' && maker.running === 0);
    expect(await workspaceEntries(root)).toHaveLength(1);
    const validator = await run(validateTest);
    await completed(dagId, validator);
    // The file exists only in the worktree: the test found it there.
    expect(existsSync(path.join(repo, 'made.txt'))).toBe(false);
    expect((await workspaceEntries(root)).map((e) => e.dagId)).toEqual([dagId]);
    expect(await reclaimer().runOnce()).toBe(1);
    expect(await workspaceEntries(root)).toEqual([]);
    expect(worktreesOf(repo)).toBe(1);
  });

  it('keep: on_failure keeps a failed attempt\'s worktree (detached) until its retention; the next attempt starts clean on the reset branch', async () => {
    const repo = repoMake(path.join(scratch, 'kept'));
    const count = path.join(scratch, 'kept-count');
    const flaky = scriptMake(path.join(scratch, 'flaky.sh'), `
n=$(cat "${count}" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "${count}"
if [ -f left.txt ]; then echo "left behind: $(cat left.txt)" >&2; exit 4; fi
echo "attempt $n" > left.txt
[ $n -ge 2 ] || exit 1`);
    const dagId = await submit(`
name: kept
tasks:
  fix:
    type: edit
    max_attempts: 2
    retry: { strategy: immediate }
    workspace: { repo: kept, keep: on_failure }
    spec: { constraints: { capabilities: [shell] }, input: { command: "${flaky}" } }
`);
    const agent = await run(shell);
    await completed(dagId, agent);
    const attempts = await rowsOf<{ fence: number; outcome: string; error_class: string | null }>(db, sql`
      select a.fence, a.outcome, a.error_class from attempts a join tasks t on t.id = a.task_id where t.dag_id = ${dagId} order by a.fence`);
    expect(attempts.map((a) => [a.outcome, a.error_class])).toEqual([['failed', 'command_failed'], ['completed', null]]);
    // The first attempt's worktree is kept as it left it, off the branch; the branch holds the second attempt's work.
    const kept = await workspaceEntries(root);
    expect(kept.map((e) => e.fence)).toEqual([attempts[0]!.fence]);
    expect(readFileSync(path.join(kept[0]!.dir, 'left.txt'), 'utf8')).toBe('attempt 1\n');
    expect(gitIn(kept[0]!.dir, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('HEAD');
    expect(gitIn(repo, 'show', `dagent/${dagId}/fix:left.txt`)).toBe('attempt 2');
    expect(await reclaimer().runOnce()).toBe(0);
    expect(await reclaimer(() => Date.now() + KEPT_SEC * 1000 + 60_000).runOnce()).toBe(1);
    expect(await workspaceEntries(root)).toEqual([]);
    expect(worktreesOf(repo)).toBe(1);
  });

  it('a repository named by URL is cloned once and fetched at each attempt, and only when the agent\'s operator allows the URL', async () => {
    const origin = repoMake(path.join(scratch, 'origin'));
    const url = `file://${origin}`;
    const dag = (name: string) => `name: ${name}\ntasks:\n  edit: { type: edit, max_attempts: 1, workspace: { repo: "${url}" }, spec: { constraints: { capabilities: [shell] }, input: { command: "echo edited > edited.txt" } } }\n`;
    const refused = await submit(dag('refused'));
    const strict = await run(shell);
    await eventually('refused', async () => (await taskStatusByKey(db, refused)).edit === 'dead_lettered');
    const [why] = await rowsOf<{ error_class: string; error_message: string }>(db, sql`select error_class, error_message from attempts where dag_id = ${refused}`);
    expect(why).toEqual({ error_class: 'workspace_unavailable', error_message: `workspace of ${url}: not a repository URL this agent may clone (DAGENT_WORKSPACE_REPO_URLS allows none)` });
    await strict.stop({ graceMs: 0 });

    const allowing = await run(shell, { workspaces: { root, keptSec: KEPT_SEC, repoUrls: [`file://${scratch}/`] } });
    const first = await submit(dag('first'));
    await completed(first, allowing);
    const mirror = path.join(root, repoKeyOf(url), 'mirror.git');
    expect((await outputs(first)).edit!.workspace.head).toBe(gitIn(mirror, 'rev-parse', `dagent/${first}/edit`));
    expect(gitIn(mirror, 'show', `dagent/${first}/edit:edited.txt`)).toBe('edited');
    // The remote is only read: dagent's branches are in its clone.
    expect(gitIn(origin, 'branch', '--list', 'dagent/*')).toBe('');
    // A commit pushed to the remote meanwhile is the next attempt's base.
    writeFileSync(path.join(origin, 'b.txt'), 'later\n');
    gitIn(origin, 'add', 'b.txt');
    gitIn(origin, 'commit', '--quiet', '-m', 'later');
    const second = await submit(dag('second'));
    await completed(second, allowing);
    expect((await outputs(second)).edit!.workspace.baseCommit).toBe(gitIn(origin, 'rev-parse', 'HEAD'));
    expect((await workspaceEntries(root)).filter((e) => [first, second].includes(e.dagId))).toEqual([]);
  });

  it('a worktree whose attempt lost its lease is reclaimed by the loop, and one whose attempt runs is not', async () => {
    const repo = repoMake(path.join(scratch, 'lost'));
    const dagId = await submit(`name: lost\ntasks:\n  t: { type: edit, workspace: { repo: lost }, spec: { constraints: { capabilities: [shell] } } }\n`);
    const agent = await agentCreate(db, 'vanishing', ['shell']);
    const [t] = await taskClaim(db, agent, { start: true });
    // What the runtime does before the handler runs, for an agent that then goes silent mid-edit.
    const ws = await workspaceOpen({ root, spec: t!.spec.workspace!, dagId, taskId: t!.id, taskKey: t!.key, fence: t!.fence });
    mkdirSync(path.join(ws.path, 'half'), { recursive: true });
    expect(await reclaimer().runOnce()).toBe(0);
    expect(existsSync(ws.path)).toBe(true);
    await leaseExpire(db, t!.id);
    expect(await reaperCreate({ db }).runOnce()).toBe(1);
    expect(await reclaimer().runOnce()).toBe(1);
    expect(existsSync(ws.path)).toBe(false);
    expect((await workspaceEntries(root)).filter((e) => e.dagId === dagId)).toEqual([]);
    expect(worktreesOf(repo)).toBe(1);
  });
});
