import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { dagSourceLoad } from '../../src/dag/load.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';
import { workspaceEntries } from '../../src/workspaces/layout.js';
import { testDatabase } from '../helpers/db.js';
import { leaseLapsedReaped, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { eventually } from '../helpers/wait.js';
import { gitIn, repoMake, scratchDir, scriptMake } from '../helpers/git-repos.js';

const database = await testDatabase();
const { db } = database;
const scratch = scratchDir();
const root = path.join(scratch, 'workspaces');
const spawnAgent = agentProcesses(database.url);
/** The shell agent as a real process, making its worktrees under this file's root. */
const shellProcess = (id: string, env: NodeJS.ProcessEnv = {}) => spawnAgent('agents/shell.ts', id, [], { env: { DAGENT_WORKSPACE_ROOT: root, ...env } });

async function submit(yaml: string): Promise<string> {
  const [r] = await dagSubmit(db, [await dagSourceLoad(yaml, 'ws.yaml', { baseDir: scratch, roots: [scratch] })]);
  return r!.dagId;
}

const attemptsOf = (dagId: string) => rowsOf<{ key: string; outcome: string; error_class: string | null; error_message: string | null }>(db, sql`
  select t.key, a.outcome, a.error_class, a.error_message from attempts a join tasks t on t.id = a.task_id where t.dag_id = ${dagId} order by t.key, a.fence`);
const worktreesOf = (repo: string) => gitIn(repo, 'worktree', 'list', '--porcelain').split('\n').filter((l) => l.startsWith('worktree ')).length;

describe('workspaces of agents as real processes', () => {
  it('kill -9 mid-edit: the next attempt reclaims the dead attempt\'s worktree and starts from a clean one', async () => {
    const repo = repoMake(path.join(scratch, 'crash'));
    const marker = path.join(scratch, 'crash-first-attempt');
    // The stand-in for a coding CLI: the first time it leaves a half-made edit and hangs (to be killed); after that it
    // finishes, and fails if it finds the half-made edit (its worktree was not clean).
    const editor = scriptMake(path.join(scratch, 'crash.sh'), `
if [ ! -f "${marker}" ]; then
  touch "${marker}"
  echo half > partial.txt
  echo "half edit" >> a.txt
  sleep 60
fi
if [ -f partial.txt ]; then echo "found a half-made edit" >&2; exit 5; fi
echo done > done.txt`);
    const dagId = await submit(`
name: crash
tasks:
  edit: { type: edit, retry: { strategy: immediate }, workspace: { repo: crash }, spec: { constraints: { capabilities: [shell] }, input: { command: "${editor}" } } }
`);
    const victim = await shellProcess('ws-victim');
    const first = await eventually('the edit half made in a worktree', async () => (await workspaceEntries(root)).find((e) => existsSync(path.join(e.dir, 'partial.txt'))));
    // Killed once it has said "received" (its first heartbeat): a crash mid-edit, charged to the attempt.
    await eventually('the victim has heartbeat', async () => (await rowsOf<{ n: number }>(db, sql`
      select count(*)::int as n from tasks where dag_id = ${dagId} and status = 'running' and heartbeat_at > claimed_at`))[0]!.n === 1);
    victim.child.kill('SIGKILL');
    await victim.exited;
    await leaseLapsedReaped(db, reaperCreate({ db }), 'ws-victim');
    // The killed attempt's worktree is still there: nothing ran since.
    expect(existsSync(first.dir)).toBe(true);

    const rescuer = await shellProcess('ws-rescuer');
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    expect((await attemptsOf(dagId)).map((a) => [a.outcome, a.error_class])).toEqual([['failed', 'crash'], ['completed', null]]);
    expect(existsSync(first.dir)).toBe(false);
    const branch = `dagent/${dagId}/edit`;
    expect(gitIn(repo, 'ls-tree', '-r', '--name-only', branch).split('\n').sort()).toEqual(['a.txt', 'done.txt', 'src/lib.txt']);
    expect(gitIn(repo, 'show', `${branch}:a.txt`)).toBe('base');
    rescuer.child.kill('SIGTERM');
    expect(await rescuer.exited).toBe(0);
    expect(await workspaceEntries(root)).toEqual([]);
    expect(worktreesOf(repo)).toBe(1);
  });

  it('past the caps, an attempt fails with a class naming the limit: a worktree too large, a repository with too many worktrees', async () => {
    const repo = repoMake(path.join(scratch, 'capped'));
    const release = path.join(scratch, 'capped-release');
    const waiter = scriptMake(path.join(scratch, 'wait.sh'), `
echo "$DAGENT_INPUT_NAME" > "$DAGENT_INPUT_NAME.txt"
i=0
while [ ! -f "${release}" ]; do i=$((i+1)); [ $i -lt 600 ] || exit 3; sleep 0.05; done`);
    const big = await submit(`
name: big
tasks:
  dump: { type: edit, workspace: { repo: capped }, spec: { constraints: { capabilities: [shell] }, input: { command: "head -c 300000 /dev/zero > blob.bin" } } }
`);
    const agent = await shellProcess('ws-capped', { DAGENT_LIMIT_WORKSPACE_BYTES: '100000', DAGENT_LIMIT_WORKSPACES_PER_REPO: '1' });
    await eventually('dump dead-lettered', async () => (await taskStatusByKey(db, big)).dump === 'dead_lettered');
    const [dumped] = await attemptsOf(big);
    expect(dumped).toMatchObject({ outcome: 'failed', error_class: 'workspace_too_large' });
    expect(dumped!.error_message).toBe('the worktree holds more than 100000 bytes of files (DAGENT_LIMIT_WORKSPACE_BYTES)');
    // Nothing of it was committed; its worktree went.
    expect(gitIn(repo, 'ls-tree', '-r', '--name-only', `dagent/${big}/dump`)).not.toContain('blob.bin');

    // Past the cap while it runs: a heartbeat's measure stops it (the command would sleep for ten minutes).
    const grow = await submit(`
name: grow
tasks:
  grow: { type: edit, workspace: { repo: capped }, spec: { constraints: { capabilities: [shell], heartbeat_sec: 1 }, input: { command: "head -c 300000 /dev/zero > blob.bin && sleep 600" } } }
`);
    await eventually('grow dead-lettered', async () => (await taskStatusByKey(db, grow)).grow === 'dead_lettered');
    expect(await attemptsOf(grow)).toMatchObject([{ outcome: 'failed', error_class: 'workspace_too_large', error_message: dumped!.error_message }]);

    const pair = await submit(`
name: pair
tasks:
  one: { type: edit, max_attempts: 1, workspace: { repo: capped }, spec: { constraints: { capabilities: [shell] }, input: { command: "${waiter}", name: one } } }
  two: { type: edit, max_attempts: 1, workspace: { repo: capped }, spec: { constraints: { capabilities: [shell] }, input: { command: "${waiter}", name: two } } }
`);
    const refused = await eventually('one task refused a worktree', async () => (await attemptsOf(pair)).find((a) => a.error_class === 'workspace_limit'));
    expect(refused.error_message).toMatch(new RegExp(`^${repo.replaceAll('/', '\\/')} has 1 worktrees already; at most 1 \\(DAGENT_LIMIT_WORKSPACES_PER_REPO\\)$`));
    writeFileSync(release, '');
    const other = refused.key === 'one' ? 'two' : 'one';
    await eventually('the other completed', async () => (await taskStatusByKey(db, pair))[other] === 'completed');
    expect(await taskStatusByKey(db, pair)).toEqual({ [refused.key]: 'dead_lettered', [other]: 'completed' });
    expect(readFileSync(path.join(repo, 'a.txt'), 'utf8')).toBe('base\n');
    agent.child.kill('SIGTERM');
    expect(await agent.exited).toBe(0);
    expect((await workspaceEntries(root)).map((e) => e.meta?.taskKey)).toEqual([]);
    expect(worktreesOf(repo)).toBe(1);
  });
});
