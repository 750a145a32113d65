import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The fields of `/proc/<pid>/stat` after the command name (Linux): index 0 is field 3 (state), 1 the parent pid,
 * 11 and 12 utime and stime, 13 and 14 the reaped children's, in clock ticks. Throws when the process is gone.
 */
export function procStat(pid: number | string): string[] {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
}

/** The live processes whose parent is `pid`. */
export function procChildren(pid: number): number[] {
  return readdirSync('/proc').filter((e) => /^\d+$/.test(e)).map(Number).filter((child) => {
    try { return Number(procStat(child)[1]) === pid; } catch { return false; }
  });
}

/** The postmaster's pid of the cluster in `clusterDir` (first line of postmaster.pid). */
export function postmasterPid(clusterDir: string): number {
  return Number(readFileSync(path.join(clusterDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
}
