/** Resolve with the first of SIGINT / SIGTERM: long-running commands stop gracefully on either. */
export function shutdownSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (s: NodeJS.Signals) => () => {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      resolve(s);
    };
    const onInt = on('SIGINT');
    const onTerm = on('SIGTERM');
    process.once('SIGINT', onInt);
    process.once('SIGTERM', onTerm);
  });
}
