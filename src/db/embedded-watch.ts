import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { embeddedServerStart, embeddedStartLockHeld, EmbeddedStoppedByOperator, processAlive, runningServerFind, STOPPED_MARKER, type EmbeddedServer } from './embedded.js';

/** How often a process using the embedded server checks that it still answers. */
export const EMBEDDED_WATCH_INTERVAL_MS = 2_000;

/**
 * The embedded server belongs to whichever dagent process started it, and stops when that
 * process exits. Every other process using the same data folder watches it: when it no longer
 * answers (its owner exited), the first to notice starts it again on the same port (the start
 * lock serializes them; the rest join) and owns it from then on, so `dagent agent run` in one
 * terminal outlives `dagent up` in another. A server an operator stopped (`dagent db stop`) is
 * left stopped. Returns the stop function; `adopt` receives a server this process now owns.
 */
export function embeddedWatch(o: { dataDir: string; log?: Logger }, adopt: (s: EmbeddedServer) => void): () => void {
  const dataDir = path.resolve(o.dataDir);
  let busy = false;
  const timer = setInterval(() => {
    if (busy || existsSync(path.join(dataDir, STOPPED_MARKER))) return;
    busy = true;
    void (async () => {
      if (await runningServerFind(path.join(dataDir, 'pg'))) return;
      const server = await embeddedServerStart({ dataDir, log: o.log, restart: true });
      if (server.owned) {
        o.log?.warn({ dataDir, port: server.port }, 'the embedded PostgreSQL server had stopped (the process that ran it exited); started it again');
        adopt(server);
      }
    })().catch((err: unknown) => {
      if (!(err instanceof EmbeddedStoppedByOperator)) o.log?.error({ err }, 'could not start the embedded PostgreSQL server again; will try at the next check');
    })
      .finally(() => { busy = false; });
  }, EMBEDDED_WATCH_INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}

export interface EmbeddedStatus {
  dataDir: string;
  running: boolean;
  pid: number | null;
  port: number | null;
  /** `dagent db stop` stopped it: watchdogs leave it so until a process starts it on purpose. */
  stoppedByOperator: boolean;
}

/** What runs in a data folder: the live server's pid and port from postmaster.pid, if it answers. */
export async function embeddedStatus(dataDirGiven: string): Promise<EmbeddedStatus> {
  const dataDir = path.resolve(dataDirGiven);
  const clusterDir = path.join(dataDir, 'pg');
  const port = (await runningServerFind(clusterDir)) ?? null;
  const pid = port === null ? null : Number(readFileSync(path.join(clusterDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  return { dataDir, running: port !== null, pid, port, stoppedByOperator: existsSync(path.join(dataDir, STOPPED_MARKER)) };
}

/**
 * Stop the data folder's server (fast shutdown: sessions are ended, nothing committed is lost)
 * and mark it stopped so running dagent processes do not start it again. Returns the status before.
 */
export async function embeddedStop(dataDirGiven: string): Promise<EmbeddedStatus> {
  // Under the start lock: a watchdog starting the server again either finished first (and this stops what it
  // started) or sees the marker once it holds the lock.
  return embeddedStartLockHeld(dataDirGiven, async () => {
    const before = await embeddedStatus(dataDirGiven);
    writeFileSync(path.join(before.dataDir, STOPPED_MARKER), `${new Date().toISOString()}\n`);
    if (before.pid === null) return before;
    process.kill(before.pid, 'SIGINT');
    const pidFile = path.join(before.dataDir, 'pg', 'postmaster.pid');
    for (const deadline = Date.now() + 60_000; existsSync(pidFile) && processAlive(before.pid) && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 50));
    }
    return before;
  });
}
