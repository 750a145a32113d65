import { execFile } from 'node:child_process';

/** Most bytes of output one git command may print before it is stopped (a diff's numstat of a huge change, say). */
const GIT_MAX_BUFFER = 16 * 1024 * 1024;
/** Tries of a command that met another process's git lock (index.lock, a ref's lock), with doubling pauses from the first. */
const LOCKED_TRIES = 6;
const LOCKED_FIRST_PAUSE_MS = 50;
/**
 * What git prints when another git process holds a lock it needs (not a ref that moved under an update-ref with an
 * old value: "cannot lock ref …: is at X but expected Y" is an answer, not a lock).
 */
const LOCKED = /\.lock'?: File exists|Unable to create '[^']*\.lock'|cannot lock ref(?![^\n]*but expected)|could not lock config file|is locked/i;

/**
 * Settings for git commands that write or check out in a repository an agent's worktree shares: no hooks and no
 * fsmonitor program (a `.git/hooks` or config an agent could reach never runs in dagent's process).
 */
export const GIT_NO_PROGRAMS = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false'] as const;
/** And for the commits dagent makes: its own identity, no signing (no prompt). */
export const GIT_COMMIT_CONFIG = [...GIT_NO_PROGRAMS, '-c', 'user.name=dagent', '-c', 'user.email=dagent@localhost', '-c', 'commit.gpgsign=false'] as const;

export class GitError extends Error {
  /** `stdout`: what it printed before failing (merge-tree's conflicted files come with exit 1). */
  constructor(readonly args: readonly string[], readonly code: number | string | null, readonly stderr: string, readonly stdout = '') {
    super(`git ${args.join(' ')}: ${stderr.trim().split('\n').slice(-3).join(' ') || `exit ${code}`}`);
    this.name = 'GitError';
  }
}

/**
 * The environment git runs in: this process's without GIT_* variables (a GIT_DIR or GIT_WORK_TREE set for the
 * agent would point every command elsewhere), never prompting, with messages in English (they are matched above).
 */
function gitEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('GIT_')) env[k] = v;
  return { ...env, GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C', LANGUAGE: 'C' };
}

/**
 * Run git with an argument list (never through a shell: a ref or a path is an argument, never code) in `cwd`.
 * A command that met another git process's lock is tried again after a pause, a bounded number of times.
 */
export async function git(cwd: string, args: readonly string[]): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await gitOnce(cwd, args);
    } catch (e) {
      if (!(e instanceof GitError) || !LOCKED.test(e.stderr) || attempt >= LOCKED_TRIES) throw e;
      await new Promise((r) => setTimeout(r, LOCKED_FIRST_PAUSE_MS * 2 ** (attempt - 1) * (0.5 + Math.random())));
    }
  }
}

/** Like git, answering whether it exited 0 (`git diff --quiet`, `rev-parse --verify`) instead of throwing. */
export async function gitTest(cwd: string, args: readonly string[]): Promise<boolean> {
  try {
    await git(cwd, args);
    return true;
  } catch (e) {
    if (e instanceof GitError && e.code === 1) return false;
    throw e;
  }
}

function gitOnce(cwd: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('git', [...args], { cwd, env: gitEnv(), maxBuffer: GIT_MAX_BUFFER, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const code = (err as NodeJS.ErrnoException & { code?: number | string }).code ?? null;
      reject(new GitError(args, code, stderr || err.message, stdout));
    });
  });
}
