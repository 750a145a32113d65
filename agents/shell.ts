import path from 'node:path';
import { defineAgent, TaskError } from '../src/index.js';
import { commandRun, type CommandInput } from './lib/command.js';

interface ShellInput extends CommandInput {
  /** Working directory, relative to the agent's. Default the agent's. */
  cwd?: string;
  /** Return a non-zero exit as output instead of failing with command_failed. Default false. */
  allowFailure?: boolean;
}

/**
 * Runs one command per task and returns its exit code, stdout and stderr.
 * It runs whatever a DAG tells it to: give the `shell` capability only to agents
 * that take work from trusted DAGs.
 */
export default defineAgent({
  name: 'shell',
  capabilities: ['shell'],
  maxConcurrent: 4,
  async run(task, ctx) {
    const input = task.spec.input as unknown as ShellInput;
    if (typeof input?.command !== 'string' || input.command.length === 0) {
      throw new TaskError('bad_input', 'spec.input.command must be a non-empty string', { retryable: false });
    }
    const cwd = path.resolve(input.cwd ?? '.');
    const started = Date.now();
    const r = await commandRun(input, cwd, ctx.signal);
    const result = { exitCode: r.exitCode, signal: r.signal, stdout: r.stdout, stderr: r.stderr, cwd, durationMs: Date.now() - started };
    if (r.timedOut) throw new TaskError('timeout', `command timed out after ${input.timeoutSec}s: ${input.command}`, { details: result });
    if (r.exitCode !== 0 && !input.allowFailure) {
      const tail = r.stderr.trim().split('\n').slice(-5).join('\n');
      throw new TaskError('command_failed', `exit ${r.exitCode ?? r.signal}: ${input.command}${tail ? `\n${tail}` : ''}`, { details: result });
    }
    return result;
  },
});
