import pg from 'pg';
import type { Logger } from 'pino';
import { READY_CHANNEL } from './queries/run.js';

/** The application_name of a listener's connection: how to find it in pg_stat_activity. */
export const LISTENER_APPLICATION_NAME = 'dagent-listener';

/** Reconnect backoff: from RECONNECT_MIN_MS, doubling, capped at RECONNECT_MAX_MS, with jitter. */
export const RECONNECT_MIN_MS = 100;
export const RECONNECT_MAX_MS = 5_000;

/**
 * One LISTEN connection per process, shared by everything in it that wants a hint:
 * the agents' claim loops ("tasks became READY") and the event stream ("a new event
 * row"). A notification is only a hint; polling stays the source of truth. When the
 * connection drops (network, database restart) it reconnects with a capped backoff,
 * LISTENs again, and wakes everyone once, since notifications sent meanwhile are lost.
 */
export class ReadyListener {
  private client: pg.Client | undefined;
  private readonly subscribers = new Set<{ fn: () => void; channel: string | undefined }>();
  private stopped = true;
  private failures = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private connectedOnce = false;

  /** `channels`: what to LISTEN to. Default: the READY channel only. */
  constructor(private readonly o: { url: string; log?: Logger; channels?: string[] }) {}

  /** The channels this connection LISTENs to. */
  get channels(): readonly string[] {
    return this.o.channels ?? [READY_CHANNEL];
  }

  /**
   * Call `fn` on every notification on `channel` (default: any of them), and after every
   * reconnect; returns the unsubscribe function.
   */
  subscribe(fn: () => void, channel?: string): () => void {
    const s = { fn, channel };
    this.subscribers.add(s);
    return () => this.subscribers.delete(s);
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

  private notifyAll(channel?: string): void {
    for (const s of this.subscribers) if (channel === undefined || s.channel === undefined || s.channel === channel) s.fn();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.o.url, application_name: LISTENER_APPLICATION_NAME });
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
    client.on('notification', (n) => this.notifyAll(n.channel));
    client.on('error', onLost);
    client.on('end', () => onLost());
    try {
      await client.connect();
      for (const ch of this.channels) await client.query(`listen ${ch}`);
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
