import { spawn } from 'node:child_process';
import { TaskError } from '../../src/index.js';

/** Keep at most this much of each stream: outputs are stored in a jsonb column. */
const MAX_STREAM_BYTES = 256 * 1024;

export interface CommandInput {
  /** Run through /bin/sh when `args` is absent; else the program, run without a shell. */
  command: string;
  args?: string[];
  env?: Record<string, string>;
  /** Kill the command (its whole process group) after this many seconds. */
  timeoutSec?: number;
  /** Written to the command's standard input, which is then closed. Default: nothing (closed at once). */
  stdin?: string;
}

export interface CommandResult { exitCode: number | null; signal: string | null; stdout: string; stderr: string; timedOut: boolean }

/** Run a command in its own process group; an abort of `signal` kills the group and rejects with the signal's reason. */
export function commandRun(input: CommandInput, cwd: string, signal: AbortSignal) {
  return new Promise<CommandResult>((resolve, reject) => {
    // Its own process group, so a timeout or abort kills the whole pipeline, not just /bin/sh
    // (a killed shell's children would keep the pipes open, and run on).
    const options = { cwd, env: commandEnv(input.env), detached: true };
    const child = input.args ? spawn(input.command, input.args, options) : spawn(input.command, { ...options, shell: true });
    const out = collector();
    const err = collector();
    child.stdout.on('data', out.add);
    child.stderr.on('data', err.add);
    // A command that exits without reading all of it closes the pipe: not an error of the agent's.
    child.stdin.on('error', () => {});
    child.stdin.end(input.stdin ?? '');
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
export function commandEnv(extra: Record<string, string> | undefined): NodeJS.ProcessEnv {
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

/** The last `lines` lines of a stream, for a verdict or an error message. */
export function tail(text: string, lines = 20): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}
