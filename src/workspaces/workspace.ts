import { mkdir, readFile, rm, rmdir, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { LIMITS, limitEnvName } from '../config/index.js';
import type { WorkspaceSpec } from '../dag/spec.js';
import { repoUrlAllowed } from '../dag/workspace-repos.js';
import { TaskError } from '../errors.js';
import { diskUsage } from './disk.js';
import { git, GIT_COMMIT_CONFIG, GIT_NO_PROGRAMS, GitError, gitTest } from './git.js';
import { repoLockHold } from './repo-lock.js';
import { repoGitDir, workspaceBranch, workspaceCount, workspacePaths, type WorkspaceMeta, type WorkspacePaths } from './layout.js';

/** What a handler gets as ctx.workspace: its attempt's worktree. */
export interface Workspace {
  /** The worktree: where the handler, its commands and the task's test steps work. */
  path: string;
  /** `dagent/<dag id>/<task key>`, reset to the base at each attempt's start. */
  branch: string;
  /** The repository it was made from, as the DAG's author named it: its real path, or its URL. */
  repo: string;
  /** The ref as the DAG wrote it (HEAD when it named none), and the commit that was when the worktree was made. */
  base: string;
  baseCommit: string;
}

/** What the output of a completed attempt records of its worktree (`output.workspace`). */
export interface WorkspaceSummary {
  branch: string;
  base: string;
  baseCommit: string;
  /** The branch's commit once the attempt ended: what it left uncommitted is committed first. */
  head: string;
  /** What changed from the base commit to head. */
  diffStat: { files: number; insertions: number; deletions: number; changed: Array<{ path: string; insertions: number | null; deletions: number | null }>; changedOmitted: number };
  /** Bytes of files in the worktree at the end (LIMITS.workspaceBytes at most). */
  diskBytes: number;
}

/** Most changed files an output lists by name (`diffStat.changed`); the rest are counted in changedOmitted. */
export const WORKSPACE_CHANGED_LISTED = 200;


export interface WorkspaceOpenRequest {
  root: string;
  /** The repository URLs (or prefixes) this agent may clone (DAGENT_WORKSPACE_REPO_URLS); a path needs none. Default none. */
  repoUrls?: readonly string[];
  spec: WorkspaceSpec;
  dagId: string;
  taskId: string;
  taskKey: string;
  fence: number;
}

/**
 * Make the worktree of one attempt: on branch dagent/<dag>/<task>, created or reset (`-B`) at the base, in a
 * folder of its own under the root. Refused (a TaskError the attempt fails with) when the repository has
 * LIMITS.workspacesPerRepo worktrees already (workspace_limit, retried as its policy says: others end meanwhile),
 * or when the repository or its base cannot be used (workspace_unavailable, not retried: the DAG must change).
 */
export async function workspaceOpen(r: WorkspaceOpenRequest): Promise<Workspace> {
  const { repo } = r.spec;
  const p = workspacePaths({ root: r.root, repo, dagId: r.dagId, taskId: r.taskId, fence: r.fence });
  const branch = workspaceBranch(r.dagId, r.taskKey);
  const base = r.spec.base ?? 'HEAD';
  await mkdir(p.repoDir, { recursive: true });
  return repoLockHold(p.repoDir, async () => {
    await writeFile(path.join(p.repoDir, 'repo.json'), JSON.stringify({ repo }));
    const count = await workspaceCount(p.repoDir);
    if (count >= LIMITS.workspacesPerRepo) {
      throw new TaskError('workspace_limit', `${repo} has ${count} worktrees already; at most ${LIMITS.workspacesPerRepo} (${limitEnvName('workspacesPerRepo')})`, { details: { worktrees: count, limit: LIMITS.workspacesPerRepo } });
    }
    const unusable = (why: string) => new TaskError('workspace_unavailable', `workspace of ${repo}: ${why}`, { retryable: false });
    const gitDir = repoGitDir(repo, p.repoDir);
    if (gitDir !== repo) await mirrorSync(repo, gitDir, r.repoUrls ?? []);
    else if (!(await stat(repo).then((s) => s.isDirectory(), () => false))) throw unusable('no such directory on this machine');
    let baseCommit: string;
    try {
      baseCommit = (await git(gitDir, ['rev-parse', '--verify', '--quiet', `${base}^{commit}`])).trim();
    } catch (e) {
      if (!(e instanceof GitError)) throw e;
      const isRepo = await gitTest(gitDir, ['rev-parse', '--git-dir']).catch(() => false);
      throw unusable(isRepo ? `base ${base} is not a commit of the repository` : 'not a git repository');
    }
    await mkdir(p.dagDir, { recursive: true });
    const meta: WorkspaceMeta = {
      repo, branch, keep: r.spec.keep, dagId: r.dagId, taskId: r.taskId, taskKey: r.taskKey, fence: r.fence, base, baseCommit, createdAt: new Date().toISOString(),
    };
    // The meta file first: a process killed between the two leaves something the reclaim recognizes.
    await writeFile(p.metaFile, JSON.stringify(meta));
    try {
      await git(gitDir, [...GIT_NO_PROGRAMS, 'worktree', 'add', '--quiet', '-B', branch, p.dir, baseCommit]);
    } catch (e) {
      await rm(p.dir, { recursive: true, force: true });
      await unlink(p.metaFile).catch(() => {});
      await git(gitDir, ['worktree', 'prune']).catch(() => {});
      if (e instanceof GitError) throw unusable(e.message);
      throw e;
    }
    return { path: p.dir, branch, repo, base, baseCommit };
  });
}

/**
 * A repository named by URL, on this machine: cloned bare into its folder the first time, fetched at each attempt
 * after (its branches and tags as the remote has them; nothing pruned, so dagent's own branches stay). Only a URL
 * this agent's operator allows (DAGENT_WORKSPACE_REPO_URLS: the URL itself, or a prefix ending at a `/` or `:`).
 * git's `ext::` transport, which runs a command, is never used.
 */
async function mirrorSync(url: string, gitDir: string, allowed: readonly string[]): Promise<void> {
  if (!repoUrlAllowed(url, allowed)) {
    throw new TaskError('workspace_unavailable', `workspace of ${url}: not a repository URL this agent may clone (DAGENT_WORKSPACE_REPO_URLS allows ${allowed.length ? allowed.join(', ') : 'none'})`, { retryable: false });
  }
  const noExt = ['-c', 'protocol.ext.allow=never'];
  try {
    if (await stat(path.join(gitDir, 'HEAD')).then(() => true, () => false)) {
      await git(gitDir, [...noExt, 'fetch', '--quiet', '--', url, '+refs/heads/*:refs/heads/*', '+refs/tags/*:refs/tags/*']);
    } else {
      await rm(gitDir, { recursive: true, force: true });
      await git(path.dirname(gitDir), [...noExt, 'clone', '--bare', '--quiet', '--', url, gitDir]);
    }
  } catch (e) {
    // The network, or the remote, may be back at the next attempt.
    if (e instanceof GitError) throw new TaskError('workspace_unavailable', `workspace of ${url}: ${e.message}`);
    throw e;
  }
}

/**
 * The summary a completed attempt's output records, after committing what the attempt left uncommitted (so the
 * branch holds all its work once the worktree is gone) and pointing the branch at the worktree's HEAD (an agent
 * that checked out something else still leaves its work on the task's branch). Refused with workspace_too_large
 * (not retried) when the worktree holds more than LIMITS.workspaceBytes.
 */
export async function workspaceFinish(ws: Workspace, message: string): Promise<WorkspaceSummary> {
  const disk = await workspaceDiskCheck(ws);
  if ('tooLarge' in disk) throw disk.tooLarge;
  await git(ws.path, ['add', '--all']);
  if (!(await gitTest(ws.path, ['diff', '--cached', '--quiet']))) {
    await git(ws.path, [...GIT_COMMIT_CONFIG, 'commit', '--quiet', '--no-verify', '--allow-empty-message', '-m', message]);
  }
  const head = (await git(ws.path, ['rev-parse', 'HEAD'])).trim();
  const on = (await git(ws.path, ['symbolic-ref', '--quiet', 'HEAD']).catch(() => '')).trim();
  if (on !== `refs/heads/${ws.branch}`) await git(ws.path, ['update-ref', `refs/heads/${ws.branch}`, head]);
  const numstat = await git(ws.path, ['diff', '--numstat', '-z', '--no-renames', ws.baseCommit, head]);
  const changed: WorkspaceSummary['diffStat']['changed'] = [];
  let files = 0;
  let insertions = 0;
  let deletions = 0;
  for (const record of numstat.split('\0')) {
    const m = /^(-|\d+)\t(-|\d+)\t([\s\S]+)$/.exec(record);
    if (!m) continue;
    files++;
    // A binary file's counts are `-`: null, and nothing added to the totals.
    const ins = m[1] === '-' ? null : Number(m[1]);
    const del = m[2] === '-' ? null : Number(m[2]);
    insertions += ins ?? 0;
    deletions += del ?? 0;
    if (changed.length < WORKSPACE_CHANGED_LISTED) changed.push({ path: m[3]!, insertions: ins, deletions: del });
  }
  return {
    branch: ws.branch, base: ws.base, baseCommit: ws.baseCommit, head,
    diffStat: { files, insertions, deletions, changed, changedOmitted: files - changed.length },
    diskBytes: disk.bytes,
  };
}

/**
 * The bytes of files in the worktree, or the error its attempt fails with past LIMITS.workspaceBytes
 * (workspace_too_large, not retried): checked at each heartbeat while the handler runs, and when it returns.
 */
export async function workspaceDiskCheck(ws: Workspace): Promise<{ bytes: number } | { tooLarge: TaskError }> {
  const disk = await diskUsage(ws.path, LIMITS.workspaceBytes);
  if (!disk.over) return { bytes: disk.bytes };
  return {
    tooLarge: new TaskError('workspace_too_large', `the worktree holds more than ${LIMITS.workspaceBytes} bytes of files (${limitEnvName('workspaceBytes')})`, {
      retryable: false, details: { diskBytesAtLeast: disk.bytes, limit: LIMITS.workspaceBytes },
    }),
  };
}

/**
 * Remove a worktree (git's record of it, its folder, its meta file): `git worktree remove --force --force` (a
 * dirty or locked one too), else the folder, then `git worktree prune`. The branch stays: it holds the work.
 */
export async function workspaceRemove(p: WorkspacePaths & { repo: string | null }): Promise<void> {
  await repoLockHold(p.repoDir, async () => {
    if (p.repo && await stat(p.dir).then(() => true, () => false)) {
      await git(p.repo, ['worktree', 'remove', '--force', '--force', p.dir]).catch(() => {});
    }
    await rm(p.dir, { recursive: true, force: true });
    if (p.repo) await git(p.repo, ['worktree', 'prune']).catch(() => {});
    await unlink(p.metaFile).catch(() => {});
    await rmdir(p.dagDir).catch(() => {});
  });
}

/**
 * Leave a kept worktree (keep: on_failure) on its commit without its branch (`checkout --detach`: files and
 * changes stay), so the task's next attempt can reset the branch to the base.
 */
export async function workspaceDetach(p: WorkspacePaths & { repo: string | null }): Promise<void> {
  if (!(await stat(p.dir).then(() => true, () => false))) return;
  if (!(await gitTest(p.dir, ['symbolic-ref', '--quiet', 'HEAD']).catch(() => false))) return;
  await repoLockHold(p.repoDir, () => git(p.dir, [...GIT_NO_PROGRAMS, 'checkout', '--quiet', '--detach']));
}

/**
 * The worktree another attempt made (the one whose output a validation task judges), if it is on this machine under
 * `root`: found by the repository, the task and the fence, never by a path anyone wrote.
 */
export async function workspaceLocate(root: string, spec: WorkspaceSpec, dagId: string, taskId: string, fence: number): Promise<Workspace | undefined> {
  const p = workspacePaths({ root, repo: spec.repo, dagId, taskId, fence });
  const meta = await readFile(p.metaFile, 'utf8').then((t) => JSON.parse(t) as WorkspaceMeta, () => null);
  if (!meta || !(await stat(p.dir).then((s) => s.isDirectory(), () => false))) return undefined;
  return { path: p.dir, branch: meta.branch, repo: meta.repo, base: meta.base, baseCommit: meta.baseCommit };
}
