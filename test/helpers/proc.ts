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

/** User + system CPU seconds of process `pid`; NaN when it is gone. */
export function cpuSeconds(pid: number): number {
  try {
    const fields = procStat(pid);
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

/**
 * CPU seconds of the PostgreSQL server of the cluster in `clusterDir` so far: the postmaster's own and its reaped
 * children's, plus its live backends' (a backend is counted live until the postmaster reaps it, then in the
 * postmaster's cutime/cstime). NaN when the server is not running.
 */
export function serverCpuSeconds(clusterDir: string): number {
  try {
    const postmaster = postmasterPid(clusterDir);
    const own = procStat(postmaster);
    let seconds = (Number(own[13]) + Number(own[14])) / 100;
    for (const pid of [postmaster, ...procChildren(postmaster)]) seconds += cpuSeconds(pid) || 0; // NaN: gone meanwhile
    return seconds;
  } catch {
    return NaN;
  }
}
