import path from 'node:path';
import { defineAgent, TaskError } from '../src/index.js';
import { commandRun, type CommandInput } from './lib/command.js';

interface ShellInput extends CommandInput {
  /** Working directory, relative to the agent's (with a workspace: to the worktree, and inside it). Default the agent's (the worktree). */
  cwd?: string;
  /** Return a non-zero exit as output instead of failing with command_failed. Default false. */
  allowFailure?: boolean;
}

/** The input fields the shell agent reads itself; every other one reaches the command as DAGENT_INPUT_<NAME>. */
const OWN_FIELDS = new Set(['command', 'args', 'cwd', 'env', 'timeoutSec', 'allowFailure']);

/**
 * Runs one command per task and returns its exit code, stdout and stderr.
 * It runs only what a DAG's author wrote: tasks from a DAG file, or from a template
 * that DAG declares (origin `dag` or `template`), never a spec an agent wrote. Data an
 * agent filled into a template (its `accepts` fields) reaches the command as
 * environment variables DAGENT_INPUT_<NAME>, never as part of the command line.
 * Give the `shell` capability only to agents that serve trusted DAGs.
 * A task with a `workspace` runs its command in its git worktree (docs/coding-agents.md).
 */
export default defineAgent({
  name: 'shell',
  capabilities: ['shell'],
  maxConcurrent: 4,
  async run(task, ctx) {
    if (task.origin !== 'dag' && task.origin !== 'template') {
      throw new TaskError('untrusted_spec', `task ${task.key} was written by an agent (origin ${task.origin}): the shell agent runs only commands from DAG files and their templates`, { retryable: false });
    }
    const input = task.spec.input as unknown as ShellInput;
    if (typeof input?.command !== 'string' || input.command.length === 0) {
      throw new TaskError('bad_input', 'spec.input.command must be a non-empty string', { retryable: false });
    }
    const data = Object.entries(input).filter(([k]) => !OWN_FIELDS.has(k));
    const names = new Map<string, string>();
    for (const [k] of data) {
      const name = `DAGENT_INPUT_${k.toUpperCase()}`;
      // Two fields that differ only in case would overwrite each other: refuse rather than pick one.
      if (names.has(name)) throw new TaskError('bad_input', `spec.input fields ${names.get(name)} and ${k} would both be ${name}`, { retryable: false });
      names.set(name, k);
    }
    const env = { ...input.env, ...Object.fromEntries(data.map(([k, v]) => [`DAGENT_INPUT_${k.toUpperCase()}`, typeof v === 'string' ? v : JSON.stringify(v)])) };
    // A task with a workspace runs in its worktree, and never outside it (a template may let an agent fill in cwd).
    const ws = ctx.workspace;
    const cwd = path.resolve(ws?.path ?? '.', input.cwd ?? '.');
    if (ws && cwd !== ws.path && !cwd.startsWith(ws.path + path.sep)) {
      throw new TaskError('bad_input', `spec.input.cwd ${input.cwd} is outside the task's worktree`, { retryable: false });
    }
    const started = Date.now();
    const r = await commandRun({ command: input.command, args: input.args, env, timeoutSec: input.timeoutSec }, cwd, ctx.signal);
    const result = { exitCode: r.exitCode, signal: r.signal, stdout: r.stdout, stderr: r.stderr, cwd, durationMs: Date.now() - started };
    if (r.timedOut) throw new TaskError('timeout', `command timed out after ${input.timeoutSec}s: ${input.command}`, { details: result });
    if (r.exitCode !== 0 && !input.allowFailure) {
      const tail = r.stderr.trim().split('\n').slice(-5).join('\n');
      throw new TaskError('command_failed', `exit ${r.exitCode ?? r.signal}: ${input.command}${tail ? `\n${tail}` : ''}`, { details: result });
    }
    return result;
  },
});
