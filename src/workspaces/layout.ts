import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { WorkspaceKeep } from '../dag/spec.js';
import { REPO_URL_LIKE } from '../dag/workspace-repos.js';

/**
 * Where worktrees live under the workspace root (DAGENT_WORKSPACE_ROOT), named so that a reclaim finds them by
 * task and fence without asking anyone:
 *
 *     <root>/<repo key>/repo.json                    the repository's path or URL
 *     <root>/<repo key>/mirror.git/                  a repository named by URL: its bare clone, fetched at each attempt
 *     <root>/<repo key>/lock                         held while a worktree is added or removed (repo-lock.ts)
 *     <root>/<repo key>/<dag id>/<task id>-<fence>/  the worktree of that attempt
 *     <root>/<repo key>/<dag id>/<task id>-<fence>.json  what it was made for (WorkspaceMeta), written before it
 */

/** A DAG's or a task's id as it may appear in a path: what ids.ts makes (`dag_…`, `tsk_…`), nothing that climbs. */
const ID_PATTERN = /^[A-Za-z0-9_]{1,64}$/;
/**
 * A task key as dag/file-schema.ts allows (a group's or a subtask's with `/`), or a for_each child's (`edit/0`): what
 * a branch is named after.
 */
const KEY_PATTERN = /^[a-z][a-z0-9_-]{0,63}(\/([a-z][a-z0-9_-]{0,63}|\d{1,10}))*$/;
const ENTRY_PATTERN = /^([A-Za-z0-9_]{1,64})-(\d{1,10})(\.json)?$/;

/** The folder of one repository's worktrees: a hash of its path, so any path makes a safe, short name. */
export function repoKeyOf(repo: string): string {
  return createHash('sha256').update(repo).digest('hex').slice(0, 16);
}

/** Where git runs for a repository: its path, or for one named by URL, its clone in the repository's folder. */
export function repoGitDir(repo: string, repoDir: string): string {
  return REPO_URL_LIKE.test(repo) ? path.join(repoDir, 'mirror.git') : repo;
}

export interface WorkspaceRef { root: string; repo: string; dagId: string; taskId: string; fence: number }

export interface WorkspacePaths { repoDir: string; dagDir: string; dir: string; metaFile: string }

export function workspacePaths(r: WorkspaceRef): WorkspacePaths {
  if (!ID_PATTERN.test(r.dagId) || !ID_PATTERN.test(r.taskId) || !Number.isInteger(r.fence) || r.fence < 0) {
    throw new Error(`not a workspace's ids: ${JSON.stringify([r.dagId, r.taskId, r.fence])}`);
  }
  const repoDir = path.join(path.resolve(r.root), repoKeyOf(r.repo));
  const dagDir = path.join(repoDir, r.dagId);
  return { repoDir, dagDir, dir: path.join(dagDir, `${r.taskId}-${r.fence}`), metaFile: path.join(dagDir, `${r.taskId}-${r.fence}.json`) };
}

/**
 * The branch of a task's worktrees: `dagent/<dag id>/<task key>`, a `/` in the key (a group's task, a subtask)
 * written `+` (no key holds one), so that no task's branch is a folder of another's (`review` and `review/lint`).
 */
export function workspaceBranch(dagId: string, key: string): string {
  if (!ID_PATTERN.test(dagId) || !KEY_PATTERN.test(key)) throw new Error(`not a task's branch: ${JSON.stringify([dagId, key])}`);
  return `dagent/${dagId}/${key.replaceAll('/', '+')}`;
}

/** What a worktree was made for, beside it: the reclaim reads it to remove or keep the worktree. */
export interface WorkspaceMeta {
  repo: string;
  branch: string;
  keep: WorkspaceKeep;
  dagId: string;
  taskId: string;
  taskKey: string;
  fence: number;
  /** The ref as the DAG wrote it (HEAD when it named none), and the commit it named when the worktree was made. */
  base: string;
  baseCommit: string;
  createdAt: string;
}

/** A worktree (or what is left of one: its meta file alone, or its folder alone) found under the root. */
export interface WorkspaceEntry extends WorkspacePaths {
  dagId: string;
  taskId: string;
  fence: number;
  /** Where git runs for its repository (repoGitDir of repo.json's), null when unreadable. */
  repo: string | null;
  meta: WorkspaceMeta | null;
}

/** The worktrees under `root`; `only` narrows to one repository's folder and one DAG's (a task's clean start). */
export async function workspaceEntries(root: string, only?: { repo: string; dagId: string; taskId?: string }): Promise<WorkspaceEntry[]> {
  const base = path.resolve(root);
  const repoKeys = only ? [repoKeyOf(only.repo)] : await dirs(base);
  const out: WorkspaceEntry[] = [];
  for (const repoKey of repoKeys) {
    const repoDir = path.join(base, repoKey);
    const named: string | null = only?.repo ?? await jsonRead<{ repo?: unknown }>(path.join(repoDir, 'repo.json')).then((j) => (typeof j?.repo === 'string' ? j.repo : null));
    const repo = named === null ? null : repoGitDir(named, repoDir);
    const dagIds = only ? [only.dagId] : (await dirs(repoDir)).filter((d) => ID_PATTERN.test(d));
    for (const dagId of dagIds) {
      const dagDir = path.join(repoDir, dagId);
      const found = new Map<string, WorkspaceEntry>();
      for (const name of await readdir(dagDir).catch(() => [] as string[])) {
        const m = ENTRY_PATTERN.exec(name);
        if (!m || (only?.taskId !== undefined && m[1] !== only.taskId)) continue;
        const id = `${m[1]}-${m[2]}`;
        if (!found.has(id)) {
          found.set(id, {
            repoDir, dagDir, dir: path.join(dagDir, id), metaFile: path.join(dagDir, `${id}.json`),
            dagId, taskId: m[1]!, fence: Number(m[2]), repo, meta: null,
          });
        }
      }
      for (const e of found.values()) {
        e.meta = await jsonRead<WorkspaceMeta>(e.metaFile);
        out.push(e);
      }
    }
  }
  return out;
}

/** How many worktrees one repository's folder holds (a meta file stands for each, written before its worktree). */
export async function workspaceCount(repoDir: string): Promise<number> {
  let n = 0;
  for (const dagId of (await dirs(repoDir)).filter((d) => ID_PATTERN.test(d))) {
    n += (await readdir(path.join(repoDir, dagId)).catch(() => [] as string[])).filter((f) => ENTRY_PATTERN.exec(f)?.[3] !== undefined).length;
  }
  return n;
}

async function dirs(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isDirectory()).map((e) => e.name);
}

async function jsonRead<T>(file: string): Promise<T | null> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as T;
  } catch {
    return null;
  }
}
