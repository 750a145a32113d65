import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';

/**
 * Bytes of the files under `dir` (symlinks counted as themselves, never followed; the worktree's `.git` file
 * skipped: the objects its commits add are the repository's). The walk stops once the total passes `cap`, so a
 * runaway worktree costs no more than the cap's worth of looking: `over` then says so.
 */
export async function diskUsage(dir: string, cap: number): Promise<{ bytes: number; over: boolean }> {
  let bytes = 0;
  const pending = [dir];
  while (pending.length) {
    const d = pending.pop()!;
    const entries = await readdir(d, { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      if (d === dir && e.name === '.git') continue;
      const p = path.join(d, e.name);
      if (e.isDirectory()) {
        pending.push(p);
        continue;
      }
      const st = await lstat(p).catch(() => null);
      bytes += st?.size ?? 0;
      if (bytes > cap) return { bytes, over: true };
    }
  }
  return { bytes, over: false };
}
