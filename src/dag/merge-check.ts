import type { DagFile } from './file-schema.js';
import { MERGE_CONFLICT_FIELD } from './spec.js';
import { REPO_URL_LIKE } from './workspace-repos.js';

export interface MergeProblem { path: Array<string | number>; message: string }

/**
 * A file's merge queues, once its repositories are real paths (workspace-repos.ts): each lands branches of one
 * repository on this machine (a path, never a URL), of tasks it depends on that work in that repository, and its
 * resolver is a template that works there too and takes the conflict as data. Each problem at its field.
 */
export function mergeQueuesCheck(file: DagFile): MergeProblem[] {
  const problems: MergeProblem[] = [];
  const repoOf = (ws: { repo: string } | undefined) => workspaceRepoOf(file, ws);
  for (const [key, t] of Object.entries(file.tasks)) {
    const m = t.merge;
    if (!m) continue;
    const at = ['tasks', key, 'merge'];
    const repo = mergeRepoOf(file, m);
    if (repo === undefined) {
      problems.push({ path: at, message: 'names no repo, and the DAG has no defaults.workspace to take it from: add merge.repo' });
      continue;
    }
    if (REPO_URL_LIKE.test(repo)) {
      problems.push({ path: m.repo !== undefined ? [...at, 'repo'] : at, message: `${repo} is a URL: a merge queue lands branches in a repository on its agent's machine; name its path` });
      continue;
    }
    const deps = new Set(t.depends_on ?? []);
    const tasks = mergeTasksOf(file, key);
    if (m.tasks === undefined && tasks.length === 0) {
      problems.push({ path: at, message: `none of the tasks "${key}" depends on works in ${repo}: list the tasks whose branches land in merge.tasks` });
    }
    (m.tasks ?? []).forEach((k, i) => {
      const path = [...at, 'tasks', i];
      const target = file.tasks[k];
      if (!target) problems.push({ path, message: `"${k}" is not a task of this DAG` });
      else if (!deps.has(k)) problems.push({ path, message: `"${k}" is not in depends_on of "${key}": its branch is not done when the queue runs (add it to depends_on)` });
      else if (tasks.indexOf(k) !== i) problems.push({ path, message: `"${k}" is listed twice` });
      else if (repoOf(target.workspace) !== repo) {
        problems.push({ path, message: repoOf(target.workspace) === undefined ? `"${k}" has no workspace: it leaves no branch to land` : `"${k}" works in ${repoOf(target.workspace)}, not in ${repo}` });
      }
    });
    if (m.resolver !== undefined) {
      const path = [...at, 'resolver'];
      const template = file.spawn?.templates?.[m.resolver];
      if (!template) problems.push({ path, message: `"${m.resolver}" is not a template of this DAG's spawn block` });
      else if (repoOf(template.workspace) !== repo) problems.push({ path, message: `the template "${m.resolver}" must have a workspace on ${repo}: its subtask resolves the conflict in a worktree and its branch lands` });
      else if (template.workspace?.base !== m.into) problems.push({ path, message: `the template "${m.resolver}" must have workspace.base ${m.into}: its subtask resolves the conflict on the target as it is, and its branch lands there` });
      else if (!(template.accepts ?? []).includes(MERGE_CONFLICT_FIELD)) problems.push({ path, message: `the template "${m.resolver}" must accept the input field ${MERGE_CONFLICT_FIELD} (accepts: [${MERGE_CONFLICT_FIELD}]): the queue hands the conflict over in it` });
    }
  }
  return problems;
}

/**
 * The tasks whose branches a merge task lands, in order: its `merge.tasks`, else those of its depends_on that run an
 * agent in a worktree of its repository (a task of its own, or the DAG's default, workspace; not a task that waits).
 */
export function mergeTasksOf(file: DagFile, key: string): string[] {
  const t = file.tasks[key]!;
  if (t.merge?.tasks) return t.merge.tasks;
  const repo = mergeRepoOf(file, t.merge ?? {});
  return (t.depends_on ?? []).filter((k) => {
    const dep = file.tasks[k];
    if (!dep || dep.wait_for || dep.approval || dep.merge) return false;
    return workspaceRepoOf(file, dep.workspace) === repo;
  });
}

/** The repository a task's (or template's) worktrees are made from: its own workspace's, else the DAG's default. */
function workspaceRepoOf(file: DagFile, ws: { repo: string } | undefined): string | undefined {
  return ws?.repo ?? file.defaults?.workspace?.repo;
}

/** A merge queue's repository: its own, else the DAG's default workspace's. */
export function mergeRepoOf(file: DagFile, m: { repo?: string }): string | undefined {
  return m.repo ?? file.defaults?.workspace?.repo;
}
