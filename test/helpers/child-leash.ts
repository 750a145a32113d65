import type { ChildProcess } from 'node:child_process';

const leashed = new Set<ChildProcess>();
let hooked = false;

/**
 * Kill `child` when this test process exits, however the test ended (a failure, a timeout, an
 * interrupted run), so no server or agent outlives the run that started it.
 */
export function leash<T extends ChildProcess>(child: T): T {
  leashed.add(child);
  child.once('exit', () => leashed.delete(child));
  if (!hooked) {
    hooked = true;
    const killAll = () => { for (const c of leashed) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL'); };
    process.once('exit', killAll);
    // On a signal: kill the children, then let the signal do what it would have done.
    for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
      const onSignal = () => {
        killAll();
        process.removeListener(sig, onSignal);
        if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
      };
      process.on(sig, onSignal);
    }
  }
  return child;
}
