import { spawn } from 'node:child_process';
import path from 'node:path';
import { defineAgent, TaskError } from '../src/index.js';

/** Keep at most this much of each stream: outputs are stored in a jsonb column. */
const MAX_STREAM_BYTES = 256 * 1024;

interface ShellInput {
  /** Run through /bin/sh when `args` is absent; else the program, run without a shell. */
  command: string;
  args?: string[];
  /** Working directory, relative to the agent's. Default the agent's. */
  cwd?: string;
  env?: Record<string, string>;
  /** Kill the command after this many seconds (error class timeout). Default: the task's max_duration_sec only. */
  timeoutSec?: number;
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

function commandRun(input: ShellInput, cwd: string, signal: AbortSignal) {
  return new Promise<{ exitCode: number | null; signal: string | null; stdout: string; stderr: string; timedOut: boolean }>((resolve, reject) => {
    // Its own process group, so a timeout or abort kills the whole pipeline, not just /bin/sh
    // (a killed shell's children would keep the pipes open, and run on).
    const options = { cwd, env: commandEnv(input.env), detached: true };
    const child = input.args ? spawn(input.command, input.args, options) : spawn(input.command, { ...options, shell: true });
    const out = collector();
    const err = collector();
    child.stdout.on('data', out.add);
    child.stderr.on('data', err.add);
    let timedOut = false;
    const killGroup = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch { /* already gone */ }
    };
    const timer = input.timeoutSec ? setTimeout(() => { timedOut = true; killGroup(); }, input.timeoutSec * 1000) : undefined;
    const onAbort = () => killGroup();
    signal.addEventListener('abort', onAbort);
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    };
    child.on('error', (e) => {
      done();
      reject(new TaskError('command_failed', `could not run ${input.command}: ${e.message}`));
    });
    child.on('close', (code, sig) => {
      done();
      // An abort (max duration, shutdown) killed the command; the runtime reports why.
      if (signal.aborted) reject(signal.reason);
      else resolve({ exitCode: code, signal: sig, stdout: out.text(), stderr: err.text(), timedOut });
    });
  });
}

/** The agent's environment without dagent's own settings (the database URL stays with the agent), plus the task's. */
function commandEnv(extra: Record<string, string> | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (k !== 'DATABASE_URL' && !k.startsWith('DAGENT_')) env[k] = v;
  return { ...env, ...extra };
}

function collector() {
  const chunks: Buffer[] = [];
  let size = 0;
  let dropped = 0;
  return {
    add: (b: Buffer) => {
      if (size + b.length <= MAX_STREAM_BYTES) { chunks.push(b); size += b.length; } else dropped += b.length;
    },
    text: () => Buffer.concat(chunks).toString('utf8') + (dropped ? `\n[… ${dropped} more bytes dropped]` : ''),
  };
}
