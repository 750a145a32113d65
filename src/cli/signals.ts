import { readFileSync } from 'node:fs';

/** How often a long-running command started by npm checks that npm is still there. */
const LAUNCHER_CHECK_MS = 1_000;

/**
 * Resolve with the first SIGINT / SIGTERM: long-running commands then stop
 * gracefully. Later signals are acknowledged and ignored, so a second Ctrl-C (or
 * a signal a supervisor forwards twice) does not kill the process mid-drain;
 * SIGKILL remains the way to force it.
 *
 * Under `npx dagent …` or `npm start`, a SIGTERM sent to npm (a container's stop,
 * a process manager) ends npm without reaching dagent (npm does not pass it on).
 * So when npm started this process, its exit counts as a SIGTERM too: dagent
 * drains and stops instead of running on orphaned and being killed later.
 */
export function shutdownSignal(onRepeat: (s: NodeJS.Signals) => void = () => {}, env: NodeJS.ProcessEnv = process.env): Promise<NodeJS.Signals | 'npm exited'> {
  return new Promise((resolve) => {
    let first: string | undefined;
    const handler = (s: NodeJS.Signals | 'npm exited') => {
      if (first) return s === 'npm exited' ? undefined : onRepeat(s);
      first = s;
      clearInterval(watch);
      resolve(s);
    };
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
    const npm = env.npm_command ? npmLauncherPid() : undefined;
    const watch = npm === undefined ? undefined : setInterval(() => {
      if (!processAlive(npm)) handler('npm exited');
    }, LAUNCHER_CHECK_MS);
    watch?.unref();
  });
}

/** The npm process above this one (npm → sh -c → node, or npm → node), from /proc; undefined elsewhere. */
function npmLauncherPid(): number | undefined {
  let pid = process.ppid;
  for (let depth = 0; depth < 2 && pid > 1; depth++) {
    const cmdline = procRead(pid, 'cmdline')?.replaceAll('\0', ' ');
    if (cmdline === undefined) return undefined; // no /proc: not Linux
    if (/\bnpm(-cli\.js|x-cli\.js)?\b|\bnpx\b|npm exec|npm run/.test(cmdline)) return pid;
    pid = Number(procRead(pid, 'stat')?.split(') ')[1]?.split(' ')[1]);
  }
  return undefined;
}

function procRead(pid: number, file: 'cmdline' | 'stat'): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/${file}`, 'utf8');
  } catch {
    return undefined;
  }
}

/** A process that exited is gone, or a zombie its parent has not reaped yet. */
function processAlive(pid: number): boolean {
  const stat = procRead(pid, 'stat');
  return stat !== undefined && stat.split(') ')[1]?.[0] !== 'Z';
}
