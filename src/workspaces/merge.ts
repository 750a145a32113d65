import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { TaskError } from '../errors.js';
import { textHead } from '../json-guard.js';
import { git, GIT_COMMIT_CONFIG, GIT_NO_PROGRAMS, GitError, gitTest } from './git.js';
import { repoLockHold } from './repo-lock.js';

/**
 * Landing one branch on a target branch (the merge queue's step, runtime/merge-queue.ts), with git's plumbing so that
 * nothing is checked out in the repository's own working tree until the target moves:
 *
 *   1. the preflight: `git merge-tree --write-tree` merges the two commits in memory (a tree, or the conflicted files);
 *   2. the merge commit (`commit-tree`, two parents), or the branch itself when the target can fast-forward to it;
 *   3. the test, when the queue has one, at the root of a worktree of that commit made for it and removed after;
 *   4. the target moved only from the commit the merge was made on (`update-ref` with the old value, or
 *      `merge --ff-only` in the worktree that has the target checked out): moved meanwhile, steps 1-4 again.
 */

/** Most conflicted files a conflict lists and diffs (the rest are counted): a step result stays small. */
const CONFLICT_FILES_MAX = 200;
/** Each side's diff a conflict hands to its resolver, at most (the rest is cut, and said so). */
export const MERGE_DIFF_MAX_CHARS = 64 * 1024;
/** Times a landing starts over because the target moved under it (another queue landed meanwhile). */
const TARGET_MOVED_TRIES = 5;

/** What the queue hands a resolver (its subtask's input `conflict`): data, the two sides, never something to run. */
export interface MergeConflict {
  /** The branch that did not merge, and the one it was to land on. */
  branch: string;
  into: string;
  branchCommit: string;
  intoCommit: string;
  mergeBase: string;
  /** The files both sides changed in ways git could not merge. */
  files: string[];
  /** Each side's changes to those files since the merge base (`git diff`), each cut at MERGE_DIFF_MAX_CHARS. */
  diffs: { into: string; branch: string };
  diffsCut: boolean;
}

export interface MergeTestResult { pass: boolean; exitCode: number | null; timedOut: boolean; outputTail: string }

/** One branch's turn in the queue. */
export type MergeOutcome =
  | { key: string; branch: string; result: 'landed'; head: string; commit: string; intoBefore: string; fastForward: boolean; tested: boolean }
  | { key: string; branch: string; result: 'already_merged'; head: string }
  | { key: string; branch: string; result: 'missing' }
  | { key: string; branch: string; result: 'conflict'; head: string; conflict: MergeConflict }
  | { key: string; branch: string; result: 'tests_failed'; head: string; commit: string; test: MergeTestResult }
  | { key: string; branch: string; result: 'target_not_moved'; head: string; commit: string; reason: string };

export interface MergeLandRequest {
  /** The repository (its real path) and the folder of dagent's files for it (repo-lock.ts, layout.ts). */
  repo: string;
  repoDir: string;
  into: string;
  /** The task whose branch lands, and that branch. */
  key: string;
  branch: string;
  /** Runs the queue's test in `dir` (a worktree of the merge); undefined: no test. */
  test?: (dir: string) => Promise<MergeTestResult>;
  /** Where the test's worktree is made (removed after). */
  testDir: string;
}

/** Land one branch on the target (module comment). Throws a TaskError only when the target branch does not exist. */
export async function mergeLand(r: MergeLandRequest): Promise<MergeOutcome> {
  const { repo, key, branch } = r;
  const head = await commitOf(repo, `refs/heads/${branch}`);
  if (!head) return { key, branch, result: 'missing' };
  for (let tries = 1; ; tries++) {
    const intoBefore = await commitOf(repo, `refs/heads/${r.into}`);
    if (!intoBefore) throw new TaskError('merge_target_missing', `the repository ${repo} has no branch ${r.into} to land on`, { retryable: false });
    if (await gitTest(repo, ['merge-base', '--is-ancestor', head, intoBefore])) return { key, branch, result: 'already_merged', head };
    const preflight = await mergeTreeWrite(repo, intoBefore, head);
    if ('conflicted' in preflight) return { key, branch, result: 'conflict', head, conflict: await conflictOf(r, intoBefore, head, preflight.conflicted) };
    const fastForward = await gitTest(repo, ['merge-base', '--is-ancestor', intoBefore, head]);
    const commit = fastForward ? head : (await git(repo, [
      ...GIT_COMMIT_CONFIG, 'commit-tree', preflight.tree, '-p', intoBefore, '-p', head, '-m', `dagent: land ${branch} on ${r.into}`,
    ])).trim();
    if (r.test) {
      const test = await mergeTestRun(r, commit);
      if (!test.pass) return { key, branch, result: 'tests_failed', head, commit, test };
    }
    const moved = await targetMove(repo, r.into, intoBefore, commit);
    if (moved === true) return { key, branch, result: 'landed', head, commit, intoBefore, fastForward, tested: r.test !== undefined };
    if (moved !== 'moved' || tries >= TARGET_MOVED_TRIES) {
      return { key, branch, result: 'target_not_moved', head, commit, reason: moved === 'moved' ? `${r.into} kept moving under the queue (${tries} tries)` : moved };
    }
  }
}

/** The commit a ref names, or undefined when there is none. */
export async function commitOf(repo: string, ref: string): Promise<string | undefined> {
  const out = await git(repo, ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]).catch((e: unknown) => {
    if (e instanceof GitError) return '';
    throw e;
  });
  return out.trim() || undefined;
}

/** `git merge-tree --write-tree` (git 2.38+): the merged tree, or the files it could not merge (exit 1). */
async function mergeTreeWrite(repo: string, ours: string, theirs: string): Promise<{ tree: string } | { conflicted: string[] }> {
  const args = ['merge-tree', '--write-tree', '--name-only', '-z', '--no-messages', ours, theirs];
  try {
    return { tree: (await git(repo, args)).split('\0')[0]!.trim() };
  } catch (e) {
    if (!(e instanceof GitError) || e.code !== 1) throw e;
    return { conflicted: [...new Set(e.stdout.split('\0').slice(1).filter(Boolean))] };
  }
}

async function conflictOf(r: MergeLandRequest, intoCommit: string, branchCommit: string, allFiles: string[]): Promise<MergeConflict> {
  const mergeBase = (await git(r.repo, ['merge-base', intoCommit, branchCommit])).trim();
  const files = allFiles.slice(0, CONFLICT_FILES_MAX);
  const side = async (commit: string) => {
    // File names are names, never pathspec magic (`:!x`); a diff past git's output cap is said to be too large.
    const diff = await git(r.repo, ['--literal-pathspecs', 'diff', '--no-color', '--no-ext-diff', mergeBase, commit, '--', ...files])
      .catch((e: unknown) => { if (e instanceof GitError) return null; throw e; });
    if (diff === null) return { text: '(the diff is too large to show)', cut: true };
    // Cut where a character ends: half a surrogate pair is not storable JSON text.
    return diff.length > MERGE_DIFF_MAX_CHARS ? { text: textHead(diff, MERGE_DIFF_MAX_CHARS), cut: true } : { text: diff, cut: allFiles.length > files.length };
  };
  const [into, branch] = await Promise.all([side(intoCommit), side(branchCommit)]);
  return {
    branch: r.branch, into: r.into, branchCommit, intoCommit, mergeBase, files,
    diffs: { into: into.text, branch: branch.text }, diffsCut: into.cut || branch.cut,
  };
}

/** The queue's test at the root of a worktree of `commit`, made under the repository's lock and removed after. */
async function mergeTestRun(r: MergeLandRequest, commit: string): Promise<MergeTestResult> {
  await mkdir(path.dirname(r.testDir), { recursive: true });
  await rm(r.testDir, { recursive: true, force: true });
  await repoLockHold(r.repoDir, () => git(r.repo, [...GIT_NO_PROGRAMS, 'worktree', 'add', '--quiet', '--detach', r.testDir, commit]));
  try {
    return await r.test!(r.testDir);
  } finally {
    await mergeTestDirRemove(r.repo, r.repoDir, r.testDir);
  }
}

/** Remove a test worktree (also one a killed agent left: the next attempt's queue removes it first). */
export async function mergeTestDirRemove(repo: string, repoDir: string, dir: string): Promise<void> {
  await repoLockHold(repoDir, async () => {
    await git(repo, ['worktree', 'remove', '--force', '--force', dir]).catch(() => {});
    await rm(dir, { recursive: true, force: true });
    await git(repo, ['worktree', 'prune']).catch(() => {});
  });
}

/**
 * Move the target from `from` to `to`: true once moved; 'moved' when it is no longer at `from` (another landing);
 * else why it could not (the worktree that has it checked out holds changes the move would overwrite).
 */
async function targetMove(repo: string, into: string, from: string, to: string): Promise<true | 'moved' | string> {
  const checkedOut = await worktreeWithBranch(repo, into);
  try {
    if (checkedOut) await git(checkedOut, [...GIT_NO_PROGRAMS, 'merge', '--ff-only', '--quiet', to]);
    else await git(repo, ['update-ref', '-m', `dagent: land on ${into}`, `refs/heads/${into}`, to, from]);
    return true;
  } catch (e) {
    if (!(e instanceof GitError)) throw e;
    if ((await commitOf(repo, `refs/heads/${into}`)) !== from) return 'moved';
    return `${into} is checked out in ${checkedOut ?? repo}, which git would not update: ${e.message}`;
  }
}

/** The working tree (the repository's own, or a linked worktree) that has `branch` checked out, if any. */
async function worktreeWithBranch(repo: string, branch: string): Promise<string | undefined> {
  // A worktree whose folder is gone (prunable) has nothing to update: forgotten first.
  await git(repo, ['worktree', 'prune']).catch(() => {});
  const list = await git(repo, ['worktree', 'list', '--porcelain', '-z']);
  let dir: string | undefined;
  for (const field of list.split('\0')) {
    if (field.startsWith('worktree ')) dir = field.slice('worktree '.length);
    else if (field === `branch refs/heads/${branch}` && dir) return dir;
  }
  return undefined;
}
