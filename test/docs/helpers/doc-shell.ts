import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CLI_COMPILED } from '../../helpers/cli.js';
import { leash } from '../../helpers/child-leash.js';
import { eventually } from '../../helpers/wait.js';

export interface ShellResult { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }
export interface ShellOptions { env: NodeJS.ProcessEnv; cwd: string }

/** Longest a command may take to end by itself, or after the signal that stops it, before it counts as hung and is killed. */
const COMMAND_TIMEOUT_MS = 90_000;

/**
 * A folder holding `dagent`, to put first on PATH: this checkout's compiled CLI (CLI_COMPILED), as `npx dagent` runs
 * an installed package's bin. It execs node, and bash execs a command line that is one simple command, so a signal
 * sent to the child reaches dagent itself.
 */
export function dagentShim(dir: string): string {
  const bin = path.join(dir, 'bin');
  mkdirSync(bin, { recursive: true });
  writeFileSync(path.join(bin, 'dagent'), `#!/bin/sh\nexec '${process.execPath}' '${CLI_COMPILED[0]}' "$@"\n`);
  chmodSync(path.join(bin, 'dagent'), 0o755);
  return bin;
}

/** A command line as a doc's reader runs it: by bash, in `cwd`. */
export class Shell {
  private stdout = '';
  private stderr = '';
  private timer: NodeJS.Timeout | undefined;
  readonly exited: Promise<ShellResult>;
  private readonly child;

  /** `longRunning`: it runs until `stop`, and only then may it hang. */
  constructor(readonly text: string, o: ShellOptions, longRunning = false) {
    this.child = leash(spawn('bash', ['-c', text], { cwd: o.cwd, env: o.env, stdio: ['ignore', 'pipe', 'pipe'] }));
    this.child.stdout.on('data', (b) => (this.stdout += b));
    this.child.stderr.on('data', (b) => (this.stderr += b));
    this.exited = new Promise((resolve) => this.child.on('close', (code, signal) => {
      clearTimeout(this.timer);
      resolve({ code, signal, stdout: this.stdout, stderr: this.stderr });
    }));
    if (!longRunning) this.hangLimit();
  }

  /** A hung command is killed, and shows as signal SIGKILL. */
  private hangLimit(): void {
    this.timer ??= setTimeout(() => this.child.kill('SIGKILL'), COMMAND_TIMEOUT_MS);
  }

  get output(): string {
    return this.stdout;
  }

  /** Wait until stdout has a line matching `pattern`; fails when the command ends first. */
  async printed(pattern: RegExp, timeoutMs = 60_000): Promise<void> {
    let ended = false;
    void this.exited.then(() => (ended = true));
    await eventually(`${this.text} printing ${pattern}`, async () => {
      if (pattern.test(this.stdout)) return true;
      if (ended) throw new Error(`${this.text} ended before printing ${pattern}:\n${this.stdout}${this.stderr}`);
      return false;
    }, timeoutMs);
  }

  /** Send `signal` (a long-running command's stop) and wait for the end. */
  stop(signal: NodeJS.Signals): Promise<ShellResult> {
    this.child.kill(signal);
    this.hangLimit();
    return this.exited;
  }
}

/** At most `n` of the functions given run at once; the others wait their turn, in order. */
export function limiter(n: number) {
  let running = 0;
  const waiting: Array<() => void> = [];
  return async <T>(fn: () => Promise<T>): Promise<T> => {
    if (running < n) running++;
    else await new Promise<void>((resolve) => waiting.push(resolve)); // handed the slot of one that ended
    try {
      return await fn();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}
