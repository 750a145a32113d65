import type { Logger } from 'pino';
import type { Db } from '../db/connection.js';
import { gatePass } from '../db/queries/maintenance-gates.js';

/** The shape every maintenance loop shares. Tests call `runOnce()` directly and never sleep. */
export interface MaintenanceService {
  readonly name: string;
  /** Start ticking; idempotent. */
  start(): void;
  /** Stop ticking and wait for a tick in progress; idempotent. */
  stop(): Promise<void>;
  /** Do one pass of the work now; returns how many items it handled. */
  runOnce(): Promise<number>;
}

export interface ServiceOptions {
  name: string;
  db: Db;
  intervalMs: number;
  /** Random ± fraction of the interval, so many processes do not tick in step. Default 0.1. */
  jitter?: number;
  /** Skip the tick unless this process wins the cadence gate (the duty runs once per interval cluster-wide). Default true. */
  gated?: boolean;
  log?: Logger;
  work: () => Promise<number>;
}

export function serviceCreate(o: ServiceOptions): MaintenanceService {
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<unknown> | undefined;
  let running = false;
  const jitter = o.jitter ?? 0.1;
  const log = o.log?.child({ service: o.name });

  const schedule = () => {
    if (!running) return;
    const delay = o.intervalMs * (1 + jitter * (2 * Math.random() - 1));
    timer = setTimeout(tick, delay);
    timer.unref();
  };
  const tick = () => {
    inFlight = (async () => {
      try {
        if (o.gated !== false && !(await gatePass(o.db, o.name, (o.intervalMs / 1000) * 0.9))) return;
        const n = await o.work();
        if (n > 0) log?.debug({ handled: n }, 'maintenance tick');
      } catch (err) {
        log?.warn({ err }, 'maintenance tick failed');
      }
    })().finally(() => {
      inFlight = undefined;
      schedule();
    });
  };

  return {
    name: o.name,
    start() {
      if (running) return;
      running = true;
      schedule();
    },
    async stop() {
      running = false;
      if (timer) clearTimeout(timer);
      timer = undefined;
      await inFlight;
    },
    runOnce: () => o.work(),
  };
}
