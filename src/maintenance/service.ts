import os from 'node:os';
import { nanoid } from 'nanoid';
import type { Logger } from 'pino';
import type { Db } from '../db/connection.js';
import { loopLeaseHold, loopLeaseRelease } from '../db/queries/maintenance-leases.js';
import { LOOP_LEASE_DEFAULTS } from '../config/index.js';

/**
 * This process as a maintenance-loop lease holder: host, pid and a random part (a restarted container may reuse
 * its pid; a new process waits for the old one's leases to lapse instead of taking them as its own).
 */
export const PROCESS_NODE = `${os.hostname()}/${process.pid}/${nanoid(6)}`;

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
  /**
   * Run only on the process holding this loop's lease (one process cluster-wide; another takes over when it dies).
   * Default true. Loops whose work is shared out row by row (SKIP LOCKED) run everywhere instead.
   */
  gated?: boolean;
  /** Who holds the lease when this loop runs. Default PROCESS_NODE; a test stands in for several nodes with others. */
  node?: string;
  log?: Logger;
  work: () => Promise<number>;
}

export function serviceCreate(o: ServiceOptions): MaintenanceService {
  let timer: NodeJS.Timeout | undefined;
  let renewTimer: NodeJS.Timeout | undefined;
  let inFlight: Promise<unknown> | undefined;
  let running = false;
  let held = false;
  const jitter = o.jitter ?? 0.1;
  const log = o.log?.child({ service: o.name });
  const gated = o.gated !== false;
  const node = o.node ?? PROCESS_NODE;

  const hold = async (tick: boolean) => {
    const before = held;
    held = await loopLeaseHold(o.db, o.name, node, LOOP_LEASE_DEFAULTS.ttlSec, tick);
    if (held && !before) log?.info({ node }, 'maintenance loop lease taken: this process runs it');
    if (!held && before) log?.warn({ node }, 'maintenance loop lease lost to another process');
  };

  const schedule = () => {
    if (!running) return;
    const delay = o.intervalMs * (1 + jitter * (2 * Math.random() - 1));
    timer = setTimeout(tick, delay);
    timer.unref();
  };
  const tick = () => {
    inFlight = (async () => {
      try {
        if (gated) {
          await hold(true);
          if (!held) return;
        }
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
      // Take the lease now, not at the first tick (an interval away): which node runs the loop shows at once.
      if (gated) hold(false).catch((err: unknown) => log?.warn({ err }, 'maintenance loop lease not taken'));
      // A loop that ticks less often than the lease must be renewed keeps it alive between ticks, and takes over a
      // lapsed one (its holder killed) within renewSec, not at its next tick minutes later.
      if (gated && o.intervalMs > LOOP_LEASE_DEFAULTS.renewSec * 1000) {
        renewTimer = setInterval(() => {
          if (running) hold(false).catch((err: unknown) => log?.warn({ err }, 'maintenance loop lease renewal failed'));
        }, LOOP_LEASE_DEFAULTS.renewSec * 1000);
        renewTimer.unref();
      }
    },
    async stop() {
      running = false;
      if (timer) clearTimeout(timer);
      clearInterval(renewTimer);
      timer = undefined;
      renewTimer = undefined;
      await inFlight;
      if (held) {
        held = false;
        await loopLeaseRelease(o.db, o.name, node).catch((err: unknown) => log?.warn({ err }, 'maintenance loop lease not given up; it lapses'));
      }
    },
    runOnce: () => o.work(),
  };
}
