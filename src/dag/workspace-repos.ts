import { stat } from 'node:fs/promises';
import path from 'node:path';
import { projectPathResolve, type ProjectRoots } from '../validation/project-files.js';
import type { DagFile, WorkspaceFile } from './file-schema.js';

/** A repository written as a URL (`https://…`, `ssh://…`, `git@host:path`) rather than a path. */
export const REPO_URL_LIKE = /^([a-z][a-z0-9+.-]*:\/\/|[^/\s]+@[^/\s:]+:)/i;
/**
 * The URLs a workspace may be cloned from: https, http, ssh, git and file URLs, and scp-like `user@host:path`,
 * without spaces or controls. Which of them an agent machine clones is its operator's choice (DAGENT_WORKSPACE_REPO_URLS).
 */
const REPO_URL = /^((https?|ssh|git|file):\/\/[^\s\x00-\x1f\x7f]+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s\x00-\x1f\x7f]+)$/;

export interface RepoProblem { path: Array<string | number>; message: string }

/**
 * Whether an operator's allow-list (DAGENT_WORKSPACE_REPO_URLS) lets a repository URL be used: the URL itself, or a
 * prefix of it ending at a `/` or `:` (one written without is taken to end at a `/`). Checked where the DAG is
 * loaded (the submitting process, the server) and again by each agent's machine before it clones.
 */
export function repoUrlAllowed(url: string, allowed: readonly string[]): boolean {
  return allowed.some((a) => url === a || url.startsWith(/[/:]$/.test(a) ? a : `${a}/`));
}


/**
 * Each `workspace.repo` of a checked file (its defaults, tasks and spawn templates) as the repository's real path,
 * checked as every path in a DAG is (validation/project-files.ts): inside the DAG's directory (a group's task: its
 * template's) or DAGENT_FILE_ROOTS, symlinks followed, and a git repository; or a URL, kept as written, which an
 * agent's machine clones only when its operator's DAGENT_WORKSPACE_REPO_URLS allows it. Returns the file with the paths
 * replaced, or the problems, each at its field. The DAG's author chooses the repository; an agent never does.
 */
export async function workspaceReposResolve(
  file: DagFile, where: ProjectRoots & { repoUrls: readonly string[] }, baseDirOf: (taskKey: string) => string | undefined,
): Promise<{ file: DagFile } | { problems: RepoProblem[] }> {
  const problems: RepoProblem[] = [];
  const resolved = new Map<string, string>();
  const resolve = async (ws: WorkspaceFile | undefined, at: Array<string | number>, baseDir: string, field: string[] = ['workspace', 'repo']): Promise<WorkspaceFile | undefined> => {
    if (!ws) return ws;
    const memo = `${baseDir}\0${ws.repo}`;
    let real = resolved.get(memo);
    if (real === undefined) {
      const r = await repoResolve(ws.repo, { ...where, baseDir });
      if ('error' in r) {
        problems.push({ path: [...at, ...field], message: r.error });
        return ws;
      }
      real = r.real;
      resolved.set(memo, real);
    }
    return { ...ws, repo: real };
  };
  const out: DagFile = { ...file, tasks: { ...file.tasks } };
  if (file.defaults?.workspace) {
    out.defaults = { ...file.defaults, workspace: await resolve(file.defaults.workspace, ['defaults'], where.baseDir) };
  }
  for (const [key, t] of Object.entries(file.tasks)) {
    // A task without its own takes the DAG's default, resolved above against the DAG's directory.
    if (t.workspace) out.tasks[key] = { ...t, workspace: await resolve(t.workspace, ['tasks', key], baseDirOf(key) ?? where.baseDir) };
    // A merge queue's repository, checked the same way; a URL is left for merge-check.ts to refuse (it lands branches in a folder).
    if (t.merge?.repo !== undefined && !REPO_URL_LIKE.test(t.merge.repo)) {
      const repo = (await resolve({ repo: t.merge.repo }, ['tasks', key], baseDirOf(key) ?? where.baseDir, ['merge', 'repo']))!.repo;
      out.tasks[key] = { ...out.tasks[key]!, merge: { ...t.merge, repo } };
    }
  }
  if (file.spawn?.templates) {
    const templates = { ...file.spawn.templates };
    for (const [name, t] of Object.entries(templates)) {
      if (t.workspace) templates[name] = { ...t, workspace: await resolve(t.workspace, ['spawn', 'templates', name], where.baseDir) };
    }
    out.spawn = { ...file.spawn, templates };
  }
  return problems.length ? { problems } : { file: out };
}

async function repoResolve(written: string, where: ProjectRoots & { repoUrls: readonly string[] }): Promise<{ real: string } | { error: string }> {
  if (REPO_URL_LIKE.test(written)) {
    if (!REPO_URL.test(written)) return { error: `${written}: not a repository URL dagent clones (https, http, ssh, git or file, or user@host:path)` };
    // The operator's allow-list here, and again on each agent's machine before it clones.
    if (!repoUrlAllowed(written, where.repoUrls)) {
      return { error: `${written}: not a repository URL this dagent accepts (DAGENT_WORKSPACE_REPO_URLS allows ${where.repoUrls.length ? where.repoUrls.join(', ') : 'none'})` };
    }
    return { real: written };
  }
  const r = await projectPathResolve(written, where);
  if ('error' in r) return r;
  // A working tree (.git, a directory or a worktree's file) or a bare repository (HEAD and objects/).
  const isRepo = await stat(path.join(r.real, '.git')).then(() => true, () => false)
    || (await stat(path.join(r.real, 'HEAD')).then((s) => s.isFile(), () => false) && await stat(path.join(r.real, 'objects')).then((s) => s.isDirectory(), () => false));
  if (!isRepo) return { error: `${written} is not a git repository` };
  return r;
}
