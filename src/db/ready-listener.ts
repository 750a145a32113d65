import pg from 'pg';
import type { Logger } from 'pino';
import { READY_LISTEN_SQL } from './queries/run.js';

/** Reconnect backoff: from RECONNECT_MIN_MS, doubling, capped at RECONNECT_MAX_MS, with jitter. */
export const RECONNECT_MIN_MS = 100;
export const RECONNECT_MAX_MS = 5_000;

/**
 * One LISTEN connection per process for "tasks became READY". A notification is
 * only a hint that wakes idle claim loops; polling stays the source of truth.
 * When the connection drops (network, database restart) it reconnects with a
 * capped backoff, LISTENs again, and wakes everyone once, since notifications
 * sent while it was away are lost.
 */
export class ReadyListener {
  private client: pg.Client | undefined;
  private readonly subscribers = new Set<() => void>();
  private stopped = true;
  private failures = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private connectedOnce = false;

  /** `channels`: what to LISTEN to. Default: the READY channel only. */
  constructor(private readonly o: { url: string; log?: Logger; channels?: string[] }) {}

  /** Call `fn` on every notification (and after every reconnect); returns the unsubscribe function. */
  subscribe(fn: () => void): () => void {
    this.subscribers.add(fn);
    return () => this.subscribers.delete(fn);
  }

  /** Resolves once listening, or once the first attempt failed (it keeps retrying in the background). */
  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => {});
  }

  get listening(): boolean {
    return this.client !== undefined;
  }

  private notifyAll(): void {
    for (const fn of this.subscribers) fn();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.o.url });
    let lost = false;
    const onLost = (err?: Error) => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = undefined;
      client.end().catch(() => {});
      if (this.stopped) return;
      this.o.log?.warn({ err: err?.message }, 'ready listener lost its connection; reconnecting');
      this.reconnectSchedule();
    };
    client.on('notification', () => this.notifyAll());
    client.on('error', onLost);
    client.on('end', () => onLost());
    try {
      await client.connect();
      for (const ch of this.o.channels ?? []) await client.query(`listen ${ch}`);
      if (!this.o.channels) await client.query(READY_LISTEN_SQL);
    } catch (err) {
      onLost(err as Error);
      return;
    }
    if (this.stopped) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.failures = 0;
    if (this.connectedOnce) this.o.log?.info('ready listener reconnected');
    this.connectedOnce = true;
    // Whatever became READY while we were not listening announced itself to nobody.
    this.notifyAll();
  }

  private reconnectSchedule(): void {
    const delay = Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** this.failures++) * (0.75 + Math.random() * 0.5);
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => void this.connect(), delay);
  }
}
