import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { defineAgent, TaskError, type ValidationStep, type Verdict, type Workspace } from '../src/index.js';
import { commandRun, tail } from './lib/command.js';

type TestStep = Extract<ValidationStep, { kind: 'test' }>;
interface TestInput { step: TestStep; output: unknown; subject: { id: string; key: string; attempt: number; workspace?: { repo: string } } }

/**
 * Runs `test` validation steps: the output under validation is written to a file
 * named by $DAGENT_OUTPUT_FILE (text as is, anything else as JSON), the step's
 * command runs in its cwd, and the exit code is the verdict. A command that cannot
 * be started at all is a crashed validation (retried), not a verdict on the output.
 * It runs only validation tasks (origin `validation`): their step comes from a DAG file or a template it declares,
 * never from an agent. Still, it runs what DAG authors write: give `validate:test` only to agents that serve trusted DAGs.
 * The output of a task with a `workspace` is tested in that attempt's worktree: run this agent on the machine
 * (the DAGENT_WORKSPACE_ROOT) where the task's agents make them.
 */
export default defineAgent({
  name: 'validate-test',
  capabilities: ['validate:test'],
  maxConcurrent: 4,
  async run(task, ctx): Promise<Verdict> {
    // Only the engine's validation tasks, whose step comes from the DAG file: never a command an agent wrote.
    if (task.origin !== 'validation') throw new TaskError('untrusted_spec', `task ${task.key} is not a validation task (origin ${task.origin}): its command was not written by a DAG author`, { retryable: false });
    const { step, output, subject } = task.spec.input as unknown as TestInput;
    if (step?.kind !== 'test') throw new TaskError('bad_input', 'spec.input.step must be a test step', { retryable: false });
    const dir = await mkdtemp(path.join(tmpdir(), 'dagent-test-'));
    try {
      const file = path.join(dir, typeof output === 'string' ? 'output.txt' : 'output.json');
      await writeFile(file, typeof output === 'string' ? output : JSON.stringify(output, null, 2));
      const env = {
        ...step.env, DAGENT_OUTPUT_FILE: file, DAGENT_TASK_ID: subject.id, DAGENT_TASK_KEY: subject.key, DAGENT_TASK_ATTEMPT: String(subject.attempt),
      };
      const started = Date.now();
      const r = await commandRun({ command: step.command, env, timeoutSec: step.timeoutSec }, testCwd(step, subject, ctx.workspace), ctx.signal);
      const stdout = tail(r.stdout);
      const stderr = tail(r.stderr);
      const reasons = r.timedOut ? [`timed out after ${step.timeoutSec}s: ${step.command}`]
        : r.exitCode === 0 ? [] : [`exit ${r.exitCode ?? r.signal}: ${step.command}`, ...(stderr || stdout ? [tail(stderr || stdout, 5)] : [])];
      return {
        pass: !r.timedOut && r.exitCode === 0,
        reasons,
        ...(r.timedOut ? { error_class: 'timeout' as const } : {}),
        exit_code: r.exitCode,
        stdout_tail: stdout,
        stderr_tail: stderr,
        duration_ms: Date.now() - started,
      };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
});

/**
 * Where the command runs: the step's cwd; for a task with a workspace, the same folder in the judged attempt's
 * worktree (its root when the cwd is outside the repository), which must be on this machine.
 */
function testCwd(step: TestStep, subject: TestInput['subject'], ws: Workspace | null): string {
  if (!subject.workspace) return step.cwd ?? process.cwd();
  if (!ws) {
    throw new TaskError('workspace_unavailable', `the worktree of ${subject.key} (attempt ${subject.attempt}) is not on this machine: run validate:test agents where that task's agents run (DAGENT_WORKSPACE_ROOT)`);
  }
  // A repository named by URL has no folder of this machine to map the step's cwd from.
  const rel = step.cwd && path.isAbsolute(ws.repo) ? path.relative(ws.repo, step.cwd) : '';
  return rel.startsWith('..') || path.isAbsolute(rel) ? ws.path : path.join(ws.path, rel);
}
