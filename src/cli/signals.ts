/**
 * Resolve with the first SIGINT / SIGTERM: long-running commands then stop
 * gracefully. Later signals are acknowledged and ignored, so a second Ctrl-C (or
 * a signal a supervisor forwards twice) does not kill the process mid-drain;
 * SIGKILL remains the way to force it.
 */
export function shutdownSignal(onRepeat: (s: NodeJS.Signals) => void = () => {}): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let first: NodeJS.Signals | undefined;
    const handler = (s: NodeJS.Signals) => {
      if (first) return onRepeat(s);
      first = s;
      resolve(s);
    };
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
  });
}
