import os from 'node:os';
import { nanoid } from 'nanoid';
import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
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

/** A loop as the registry (index.ts) lists it: its name, which is its lease's, and whether one process at a time runs it. */
export interface LoopIdentity {
  readonly name: string;
  /** True: only the process holding this loop's lease runs it (ServiceOptions.gated). */
  readonly gated: boolean;
}

/**
 * Run `pass` until it handles fewer than `batch` items (the work is drained), or `maxPasses` times; returns how
 * many it handled in all. The shape of every loop whose statement takes a batch at a time.
 */
export async function drain(batch: number, pass: () => Promise<number>, maxPasses = Infinity): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxPasses; i++) {
    const n = await pass();
    total += n;
    if (n < batch) break;
  }
  return total;
}

/** What the options of every loop run under a lease share. */
export interface LoopOptions {
  db: Db;
  log?: Logger;
  /** Seconds the loop's lease lasts without a renewal (DAGENT_LOOP_LEASE_SEC). Default LOOP_LEASE_DEFAULTS.ttlSec. */
  leaseSec?: number;
}

export interface ServiceOptions extends LoopOptions {
  name: string;
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
  work: () => Promise<number>;
}

export function serviceCreate(o: ServiceOptions): MaintenanceService {
  let timer: NodeJS.Timeout | undefined;
  let renewTimer: NodeJS.Timeout | undefined;
  let inFlight: Promise<unknown> | undefined;
  let tickStartedAt: number | undefined;
  let running = false;
  let held = false;
  /** The lease statements, one at a time and in order, so `held` says what the last one found. */
  let leaseQueue: Promise<unknown> = Promise.resolve();
  const jitter = o.jitter ?? 0.1;
  const log = o.log?.child({ service: o.name });
  const gated = o.gated !== false;
  const node = o.node ?? PROCESS_NODE;
  const leaseSec = o.leaseSec ?? LOOP_LEASE_DEFAULTS.ttlSec;
  const ttlMs = leaseSec * 1000;

  const hold = (tick: boolean): Promise<void> => {
    const done = leaseQueue.then(async () => {
      const before = held;
      try {
        held = await loopLeaseHold(o.db, o.name, node, leaseSec, tick);
      } catch (err) {
        // Unknown, the database not answering: work only once a renewal succeeds again.
        held = false;
        throw err;
      }
      if (held && !before) log?.info({ node }, 'maintenance loop lease taken: this process runs it');
      if (!held && before) log?.warn({ node }, 'maintenance loop lease lost to another process');
    });
    leaseQueue = done.catch(() => {});
    return done;
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
        tickStartedAt = Date.now();
        const n = await o.work();
        if (n > 0) log?.debug({ handled: n }, 'maintenance tick');
      } catch (err) {
        log?.warn({ err }, 'maintenance tick failed');
      }
    })().finally(() => {
      inFlight = undefined;
      tickStartedAt = undefined;
      schedule();
    });
  };

  return {
    name: o.name,
    start() {
      if (running) return;
      running = true;
      schedule();
      if (!gated) return;
      // Take the lease now, not at the first tick (an interval away): which node runs the loop shows at once.
      hold(false).catch((err: unknown) => log?.warn({ err }, 'maintenance loop lease not taken'));
      // renewsPerLease times a lease besides the ticks: the lease stays alive through a long tick and between the
      // ticks of a slow loop, and a lapsed one (its holder killed) moves within a renewal interval, not at a tick
      // minutes later. A tick stuck past the lease (a statement that never answers) is not renewed: the loop moves
      // to a process that can run it.
      renewTimer = setInterval(() => {
        if (!running || (tickStartedAt !== undefined && Date.now() - tickStartedAt > ttlMs)) return;
        hold(false).catch((err: unknown) => log?.warn({ err }, 'maintenance loop lease renewal failed'));
      }, ttlMs / LOOP_LEASE_DEFAULTS.renewsPerLease);
      renewTimer.unref();
    },
    async stop() {
      running = false;
      if (timer) clearTimeout(timer);
      clearInterval(renewTimer);
      timer = undefined;
      renewTimer = undefined;
      await inFlight;
      if (!gated) return;
      await leaseQueue;
      held = false;
      // Whether or not the last statement found it held: it may have been written after the last look.
      await loopLeaseRelease(o.db, o.name, node).catch((err: unknown) => log?.warn({ err }, 'maintenance loop lease not given up; it lapses'));
    },
    runOnce: () => o.work(),
  };
}
