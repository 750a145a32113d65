import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { defineAgent, TaskError, type ClaimedTask, type TaskContext } from '../src/index.js';
import { commandRun, tail } from './lib/command.js';

/**
 * A coding agent: runs the coding CLI its operator chose (`claude -p`, `codex exec`, `aider`, or any command) in the
 * task's git worktree, with the task on standard input and in files, commits what the CLI changed, and returns the
 * diff. The command comes from this agent's environment (DAGENT_CODING_COMMAND), never from a task: a DAG author
 * or an agent that spawns a subtask supplies the prompt and data, nothing that runs. docs/coding-agents.md.
 *
 * What the command gets:
 *   - standard input: the task as text (its title, prompt, spec.input, and the upstream outputs it names);
 *   - DAGENT_PROMPT_FILE: the same text in a file, DAGENT_TASK_FILE: the task as JSON (key, title, prompt, input,
 *     inputs), both outside the worktree (nothing dagent writes is committed), removed after;
 *   - the worktree as its working directory; the agent's environment without dagent's settings (commandEnv).
 * A resolver task of a merge queue (its input `conflict`) starts with the conflicting branch merged into the worktree,
 * conflict markers and all; the command resolves them, and the attempt fails if any remain.
 */
const COMMAND_ENV = 'DAGENT_CODING_COMMAND';
/** The capabilities it claims by: DAGENT_CODING_CAPABILITIES (comma-separated), default `coding`. */
const CAPABILITIES_ENV = 'DAGENT_CODING_CAPABILITIES';
/** Most characters of the diff an output carries (the branch holds all of it). */
const DIFF_MAX_CHARS = 64 * 1024;
const COMMIT_CONFIG = ['-c', 'user.name=dagent', '-c', 'user.email=dagent@localhost', '-c', 'commit.gpgsign=false', '-c', 'core.hooksPath=/dev/null'];
const COMMIT_PATTERN = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

const run = promisify(execFile);
/** git in the worktree, never through a shell, without GIT_* variables of the agent's (a GIT_DIR would point it elsewhere). */
const gitIn = async (cwd: string, args: string[]) => {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GIT_')));
  return (await run('git', args, { cwd, maxBuffer: 64 << 20, env: { ...env, LC_ALL: 'C', GIT_TERMINAL_PROMPT: '0' } })).stdout;
};

export default defineAgent({
  name: 'coding',
  capabilities: (process.env[CAPABILITIES_ENV] ?? 'coding').split(',').map((c) => c.trim()).filter(Boolean),
  maxConcurrent: 2,
  preflight: () => (process.env[COMMAND_ENV]?.trim() ? undefined : `${COMMAND_ENV} is not set: name the coding CLI this agent runs (claude -p, codex exec -, aider …)`),
  async run(task, ctx) {
    const ws = ctx.workspace;
    if (!ws) throw new TaskError('workspace_required', `task ${task.key} has no workspace: the coding agent works only in a task's git worktree (workspace: in the DAG)`, { retryable: false });
    const command = process.env[COMMAND_ENV]!.trim();
    const conflict = await conflictStart(task, ws.path);
    const text = promptText(task, conflict);
    const dir = await mkdtemp(path.join(tmpdir(), 'dagent-coding-'));
    try {
      const promptFile = path.join(dir, 'prompt.md');
      const taskFile = path.join(dir, 'task.json');
      await writeFile(promptFile, text);
      await writeFile(taskFile, JSON.stringify({ key: task.key, title: task.title, prompt: task.spec.prompt ?? null, input: task.spec.input, inputs: task.inputs }, null, 2));
      const r = await commandRun({ command, stdin: text, env: { DAGENT_PROMPT_FILE: promptFile, DAGENT_TASK_FILE: taskFile } }, ws.path, ctx.signal);
      if (r.exitCode !== 0) {
        throw new TaskError('command_failed', `the coding command exited ${r.exitCode ?? r.signal}${r.stderr.trim() ? `: ${tail(r.stderr, 5)}` : ''}`, { details: { exitCode: r.exitCode, stderr: tail(r.stderr) } });
      }
      if (conflict) await conflictsLeftCheck(ws.path, conflict.files);
      const committed = await commitAndDiff(task, ctx, ws.path, ws.baseCommit);
      if (conflict) await conflictMergedCheck(ws.path, conflict);
      return { exitCode: 0, summary: tail(r.stdout, 40), ...committed };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
});

interface Conflict { branch: string; branchCommit: string; files: string[] }

/**
 * A resolver's worktree starts with the conflicting branch merged in (`git merge --no-commit`: the conflicted files
 * hold git's markers). The commit comes from the task's data: only a full commit id is used, as an argument.
 */
async function conflictStart(task: ClaimedTask, dir: string): Promise<Conflict | undefined> {
  const c = (task.spec.input as { conflict?: Partial<Conflict> }).conflict;
  if (c === undefined) return undefined;
  if (typeof c?.branchCommit !== 'string' || !COMMIT_PATTERN.test(c.branchCommit) || !Array.isArray(c.files)) {
    throw new TaskError('bad_input', 'spec.input.conflict must be a merge queue\'s conflict (branchCommit a commit id, files a list)', { retryable: false });
  }
  await gitIn(dir, [...COMMIT_CONFIG, 'merge', '--no-ff', '--no-commit', '--quiet', c.branchCommit]).catch(() => undefined);
  // The conflicted files are git's, not the input's list (the target may have moved since the queue's preflight).
  const files = (await gitIn(dir, ['diff', '--name-only', '-z', '--diff-filter=U'])).split('\0').filter(Boolean);
  return { branch: String(c.branch ?? c.branchCommit), branchCommit: c.branchCommit, files };
}

/** After the command: the branch's commit is part of the work (a command that aborted the merge resolved nothing). */
async function conflictMergedCheck(dir: string, c: Conflict): Promise<void> {
  const merged = await gitIn(dir, ['merge-base', '--is-ancestor', c.branchCommit, 'HEAD']).then(() => true, () => false);
  if (!merged) throw new TaskError('conflict_unresolved', `${c.branch} (${c.branchCommit.slice(0, 12)}) is not merged in the worktree: the command aborted the merge`);
}

/** A file that still has git's conflict markers after the command: the attempt fails (retried from a clean worktree). */
async function conflictsLeftCheck(dir: string, files: string[]): Promise<void> {
  const left: string[] = [];
  for (const f of files) {
    // git's paths, relative to the worktree; never one that leaves it.
    const file = path.resolve(dir, f);
    if (!file.startsWith(dir + path.sep)) continue;
    const text = await readFile(file, 'utf8').catch(() => '');
    if (/^(<{7}|>{7}) /m.test(text)) left.push(f);
  }
  if (left.length) throw new TaskError('conflict_unresolved', `conflict markers left in ${left.join(', ')}`);
}

function promptText(task: ClaimedTask, conflict: Conflict | undefined): string {
  const parts = [`# ${task.title ?? task.key}`];
  if (task.spec.prompt) parts.push(task.spec.prompt);
  if (conflict) {
    parts.push(`## Merge conflict\nThe branch ${conflict.branch} is merged into this working tree and conflicts in: ${conflict.files.join(', ')}.\nResolve every conflict (keep the intent of both sides), leaving no conflict markers.`);
  }
  const input = Object.fromEntries(Object.entries(task.spec.input).filter(([k]) => k !== 'conflict'));
  if (Object.keys(input).length) parts.push(`## Input\n\`\`\`json\n${JSON.stringify(input, null, 2)}\n\`\`\``);
  for (const [ref, value] of Object.entries(task.inputs)) parts.push(`## ${ref}\n\`\`\`json\n${JSON.stringify(value, null, 2)}\n\`\`\``);
  return `${parts.join('\n\n')}\n`;
}

/** Commit what the command left (a resolver's merge completes with both parents), and the diff from the base. */
async function commitAndDiff(task: ClaimedTask, ctx: TaskContext, dir: string, baseCommit: string) {
  await gitIn(dir, ['add', '--all']);
  const merging = await gitIn(dir, ['rev-parse', '--verify', '--quiet', 'MERGE_HEAD']).then(() => true, () => false);
  const staged = await gitIn(dir, ['diff', '--cached', '--quiet']).then(() => false, () => true);
  if (staged || merging) {
    await gitIn(dir, [...COMMIT_CONFIG, 'commit', '--quiet', '--no-verify', '--allow-empty', '-m', `${task.title ?? task.key} (${task.dagId})`]);
  }
  const diff = await gitIn(dir, ['diff', '--no-color', '--no-ext-diff', baseCommit, 'HEAD']);
  ctx.log.info({ chars: diff.length }, 'coding: changes committed');
  return { diff: diff.slice(0, DIFF_MAX_CHARS), diffCut: diff.length > DIFF_MAX_CHARS };
}
