import path from 'node:path';
import { readdir } from 'node:fs/promises';
import { configFromEnv } from '../config/index.js';
import type { ClaimedTask } from '../engine/attempt/claim.js';
import { MERGE_CONFLICT_FIELD, type MergeSpec } from '../dag/spec.js';
import { TaskError } from '../errors.js';
import { textTail } from '../json-guard.js';
import { gitTest } from '../workspaces/git.js';
import { repoKeyOf, workspaceBranch } from '../workspaces/layout.js';
import { commitOf, mergeLand, mergeTestDirRemove, type MergeConflict, type MergeOutcome, type MergeTestResult } from '../workspaces/merge.js';
import type { TaskContext } from './define-agent.js';

/** What runs the queue's test command: the DAG author's command, in `cwd`, stopped after timeoutSec or on `signal`. */
export type MergeTestRunner = (
  test: { command: string; env: Record<string, string>; timeoutSec: number }, cwd: string, signal: AbortSignal,
) => Promise<{ exitCode: number | null; timedOut: boolean; stdout: string; stderr: string }>;

export interface MergeQueueOptions {
  /** Runs the queue's `test` (agents/merge.ts passes its command runner). Required when a queue has a test. */
  runTest?: MergeTestRunner;
  /** Where the test worktrees are made; default DAGENT_WORKSPACE_ROOT's. */
  root?: string;
}

/** A merge task's output. */
export interface MergeQueueOutput {
  into: string;
  repo: string;
  /** The target's commit once the queue ended. */
  head: string | null;
  /** The tasks whose work is on the target now (landed, or merged before), in the order they landed. */
  landed: string[];
  /** The tasks whose branch did not land, and why; a conflict with a resolver names the resolver's task. */
  notLanded: Array<{ key: string; result: MergeOutcome['result']; resolvedBy?: string }>;
  /** Each branch's turn, in order (conflicts without their diffs: the resolver's input holds them). */
  queue: Array<Omit<MergeOutcome, 'conflict'> & { files?: string[] }>;
}

/** Most characters of the test's output a failed landing keeps (its end). */
const TEST_OUTPUT_TAIL = 4000;

/**
 * Run a merge task (its spec.merge, written by the DAG's author): land its tasks' branches on the target in order
 * (workspaces/merge.ts), each landing a durable step, so a retry after a crash goes on where the queue was; a
 * conflict, when the queue has a resolver, spawns a subtask from that template with the conflict as its input
 * `conflict`; once every branch has had its turn the task waits for the resolvers (`ctx.spawn` with wait), then lands
 * their branches the same way (a resolver's branch that conflicts again is reported, not resolved again).
 *
 * Branches are found by the tasks' keys (`dagent/<dag id>/<task key>`), never by a name an output gives.
 */
export async function mergeQueueRun(task: ClaimedTask, ctx: TaskContext, options: MergeQueueOptions = {}): Promise<MergeQueueOutput> {
  const m = task.spec.merge;
  if (!m) throw new TaskError('bad_input', `task ${task.key} is not a merge task (its spec has no merge)`, { retryable: false });
  // Only a DAG's author writes a merge queue (the schemas give agents no way to): never one an agent made up.
  if (task.origin !== 'dag') throw new TaskError('untrusted_spec', `task ${task.key} was not written by a DAG's author (origin ${task.origin}): it lands nothing`, { retryable: false });
  if (m.test && !options.runTest) throw new TaskError('bad_input', 'the merge queue has a test and this agent gives it no way to run one (mergeQueueRun options.runTest)', { retryable: false });
  const root = options.root ?? configFromEnv().workspaceRoot;
  const repoDir = path.join(path.resolve(root), repoKeyOf(m.repo));
  const testBase = path.join(repoDir, 'merge', `${task.id}-`);
  await leftoverTestDirsRemove(m.repo, repoDir, task.id);
  let tests = 0;

  const test = m.test && options.runTest ? testOf(m.test, options.runTest, ctx.signal) : undefined;
  const land = (key: string) => ctx.step(`land ${key}`, async () => {
    const branch = workspaceBranch(task.dagId, key);
    const outcome = await mergeLand({ repo: m.repo, repoDir, into: m.into, key, branch, test, testDir: `${testBase}${task.fence}-${++tests}` });
    ctx.log.info({ key, branch, result: outcome.result }, 'merge queue: branch turn');
    return outcome;
  });

  const outcomes: MergeOutcome[] = [];
  for (const key of branchKeys(m, ctx)) outcomes.push(await land(key));
  const resolvers = new Map<string, string>();
  if (m.resolver) {
    const conflicts = outcomes.filter((o): o is Extract<MergeOutcome, { result: 'conflict' }> => o.result === 'conflict');
    const keys = resolverKeysOf(conflicts.map((c) => c.key));
    const specs = conflicts.map((c, i) => ({ key: keys[i]!, template: m.resolver!, spec: { input: { [MERGE_CONFLICT_FIELD]: c.conflict satisfies MergeConflict } } }));
    if (specs.length) {
      // Ends this attempt until they completed; the next one replays the landings above and gets here again.
      const children = await ctx.spawn(specs, { wait: true });
      for (const [i, c] of conflicts.entries()) {
        // The DAG knows a subtask as <parent key>/<key>: its branch is named after that.
        const resolverKey = `${task.key}/${children[i]!.key}`;
        const outcome = await land(resolverKey);
        outcomes.push(outcome);
        // Resolved only if the conflicting branch's work is in the target now (a resolver that never merged it is not).
        const onTarget = await gitTest(m.repo, ['merge-base', '--is-ancestor', c.head, `refs/heads/${m.into}`]).catch(() => false);
        if (onTarget && (outcome.result === 'landed' || outcome.result === 'already_merged')) resolvers.set(c.key, resolverKey);
      }
    }
  }
  const landed = outcomes.filter((o) => o.result === 'landed' || o.result === 'already_merged').map((o) => o.key);
  const head = (await commitOf(m.repo, `refs/heads/${m.into}`).catch(() => undefined)) ?? null;
  return {
    into: m.into,
    repo: m.repo,
    head,
    landed,
    notLanded: outcomes.filter((o) => !landed.includes(o.key)).map((o) => ({ key: o.key, result: o.result, ...(resolvers.has(o.key) ? { resolvedBy: resolvers.get(o.key)! } : {}) })),
    queue: outcomes.map(({ conflict, ...o }: MergeOutcome & { conflict?: MergeConflict }) => (conflict ? { ...o, files: conflict.files } : o)),
  };
}

/**
 * The keys whose branches land, in order: each listed task's, a for_each task's children's (`<key>/0`, …, as many as
 * its output lists: its children's outputs, in item order).
 */
function branchKeys(m: MergeSpec, ctx: TaskContext): string[] {
  return m.tasks.flatMap(({ key, forEach }) => {
    if (!forEach) return [key];
    const items = ctx.inputs[key];
    return Array.isArray(items) ? items.map((_, i) => `${key}/${i}`) : [];
  });
}

/**
 * The resolver subtasks' keys (stored under the merge task): `resolve-<task key, / as ->`, or `resolve-<n>` where that
 * would pass 64 characters or repeat one (`edit/0` and `edit-0`); the same for the same conflicts, as a retry needs.
 */
function resolverKeysOf(keys: string[]): string[] {
  const seen = new Set<string>();
  return keys.map((key, i) => {
    const named = `resolve-${key.replaceAll('/', '-')}`;
    const k = named.length <= 64 && !seen.has(named) ? named : `resolve-${i}`;
    seen.add(k);
    return k;
  });
}

function testOf(test: NonNullable<MergeSpec['test']>, run: MergeTestRunner, signal: AbortSignal) {
  return async (dir: string): Promise<MergeTestResult> => {
    const r = await run({ command: test.command, env: test.env, timeoutSec: test.timeoutSec }, dir, signal);
    const output = `${r.stdout}${r.stderr}`;
    return { pass: !r.timedOut && r.exitCode === 0, exitCode: r.exitCode, timedOut: r.timedOut, outputTail: textTail(output, TEST_OUTPUT_TAIL) };
  };
}

/** Test worktrees an earlier attempt of this task left (an agent killed mid-test): removed before the queue goes on. */
async function leftoverTestDirsRemove(repo: string, repoDir: string, taskId: string): Promise<void> {
  const dir = path.join(repoDir, 'merge');
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names.filter((n) => n.startsWith(`${taskId}-`))) await mergeTestDirRemove(repo, repoDir, path.join(dir, name));
}
