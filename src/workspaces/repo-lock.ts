import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { open, readFile, stat, unlink } from 'node:fs/promises';
import { WORKSPACE_DEFAULTS } from '../config/index.js';
import { TaskError } from '../errors.js';

/** The operations on one repository in this process, one after another: each waits for the one before. */
const queues = new Map<string, Promise<void>>();
const HOST = os.hostname();

/**
 * Run `fn` holding the lock of one repository's folder under the workspace root: worktrees are added, counted and
 * removed one at a time per repository, in this process (a queue) and across the processes that share the root
 * (a lock file made with O_EXCL). git locks its own files too, and git() tries again when it meets one; this lock
 * also makes the count against LIMITS.workspacesPerRepo and the add that follows it one step.
 */
export async function repoLockHold<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  const before = queues.get(dir) ?? Promise.resolve();
  let done!: () => void;
  const mine = new Promise<void>((r) => (done = r));
  const tail = before.then(() => mine);
  queues.set(dir, tail);
  await before;
  try {
    const release = await lockFileTake(path.join(dir, 'lock'));
    try {
      return await fn();
    } finally {
      await release();
    }
  } finally {
    done();
    if (queues.get(dir) === tail) queues.delete(dir);
  }
}

/**
 * Run `fn` holding `file` as a lock, or skip it (undefined) while another process holds it: the reclaim pass over
 * a root, which one process at a time does (the next pass of another one finds what this one left).
 */
export async function lockFileTry<T>(file: string, fn: () => Promise<T>): Promise<T | undefined> {
  const release = await lockFileTake(file, false);
  if (!release) return undefined;
  try {
    return await fn();
  } finally {
    await release();
  }
}

async function lockFileTake(file: string, wait?: true): Promise<() => Promise<void>>;
async function lockFileTake(file: string, wait: false): Promise<(() => Promise<void>) | undefined>;
async function lockFileTake(file: string, wait = true): Promise<(() => Promise<void>) | undefined> {
  const token = `${HOST} ${process.pid} ${randomBytes(6).toString('hex')}`;
  const until = Date.now() + WORKSPACE_DEFAULTS.lockWaitMs;
  for (let pause = 20; ; pause = Math.min(pause * 2, 500)) {
    try {
      const fh = await open(file, 'wx');
      await fh.writeFile(token);
      await fh.close();
      return async () => {
        // Only our own: a lock taken over as stale while we held it is the new holder's.
        if ((await readFile(file, 'utf8').catch(() => '')) === token) await unlink(file).catch(() => {});
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    if (await lockStale(file)) {
      // Two processes may both find it stale and both take it over; git's own locks still keep its files whole.
      await unlink(file).catch(() => {});
      continue;
    }
    if (!wait) return undefined;
    if (Date.now() > until) {
      throw new TaskError('workspace_unavailable', `the repository's workspaces are locked by another process (${file}) for more than ${WORKSPACE_DEFAULTS.lockWaitMs / 1000} s`);
    }
    await new Promise((r) => setTimeout(r, pause * (0.5 + Math.random())));
  }
}

/** A lock whose process on this host is gone (killed while it held it), or older than any operation takes. */
async function lockStale(file: string): Promise<boolean> {
  const [text, st] = await Promise.all([readFile(file, 'utf8').catch(() => null), stat(file).catch(() => null)]);
  if (text === null || st === null) return false;
  if (Date.now() - st.mtimeMs > WORKSPACE_DEFAULTS.lockStaleMs) return true;
  const [host, pidText] = text.split(' ');
  const pid = Number(pidText);
  if (host !== HOST || !Number.isInteger(pid) || pid <= 0) return false;
  // This process takes the lock only through the queue above, which waits for its release: a lock naming our pid
  // is a predecessor's that had the same pid (a restarted container).
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
