import pg from 'pg';
import type { Logger } from 'pino';
import { LISTENER_DEFAULTS } from '../config/index.js';
import { READY_CHANNEL } from './statement.js';
import { LISTENER_ROSTER_ALONE, listenerRosterJoinSql, listenerRosterRead, type ListenerRoster } from './queries/listener-roster.js';

/** The application_name of a listener's connection: how to find it in pg_stat_activity. */
export const LISTENER_APPLICATION_NAME = 'dagent-listener';
/**
 * The application_name of a listener whose process's claims wait for work (rosterKeep): the roster counts these, so
 * a listener for events or revocations only is no member given a part of READY hints it has no claim to wake for.
 */
export const ROSTER_APPLICATION_NAME = `${LISTENER_APPLICATION_NAME} claims`;

let reconnectsTotal = 0;
/** Reconnects of every listener in this process since it started (the metric dagent_listener_reconnects_total). */
export function listenerReconnectsTotal(): number {
  return reconnectsTotal;
}

/** The listeners of this process that were started and not stopped. */
const started = new Set<ReadyListener>();
/**
 * How many of this process's listeners are not listening now (the metric dagent_listener_down): their subscribers
 * hear nothing, and the agents among them find work by polling only until the connection is back.
 */
export function listenersDown(): number {
  let n = 0;
  for (const l of started) if (!l.listening) n++;
  return n;
}

/**
 * One LISTEN connection per process, shared by everything in it that wants a hint:
 * the agents' claim loops ("tasks became READY") and the event stream ("a new event
 * row"). A notification is only a hint; polling stays the source of truth. When the
 * connection drops (network, database restart) it reconnects with a capped backoff,
 * LISTENs again, and wakes everyone once, since notifications sent meanwhile are lost.
 */
export class ReadyListener {
  private client: pg.Client | undefined;
  private readonly subscribers = new Set<{ fn: (payload?: string) => void; channel: string | undefined }>();
  private stopped = true;
  private failures = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private connectedOnce = false;
  /** This listener's own channel for its health-check pings. */
  private readonly pingChannel = `dagent_ping_${Math.random().toString(36).slice(2, 12)}`;
  /** Whether the roster is kept (rosterKeep), its latest reading, and what reads it again on the live connection. */
  private rosterKept = false;
  private rosterLast: ListenerRoster = LISTENER_ROSTER_ALONE;
  private rosterRefresh: (() => void) | undefined;

  /**
   * `channels`: what to LISTEN to. Default: the READY channel only. The health check's timings and the statement
   * timeout, and how often the roster is read: LISTENER_DEFAULTS unless given (a test that checks what a half-open
   * connection does, or who the roster holds, not how soon).
   */
  constructor(private readonly o: {
    url: string; log?: Logger; channels?: string[];
    healthIntervalMs?: number; healthTimeoutMs?: number; statementTimeoutMs?: number; rosterIntervalMs?: number;
  }) {}

  /** The channels this connection LISTENs to. */
  get channels(): readonly string[] {
    return this.o.channels ?? [READY_CHANNEL];
  }

  /**
   * Call `fn` with the payload of every notification on `channel` (default: any of them), and
   * without one after every reconnect; returns the unsubscribe function.
   */
  subscribe(fn: (payload?: string) => void, channel?: string): () => void {
    const s = { fn, channel };
    this.subscribers.add(s);
    return () => this.subscribers.delete(s);
  }

  /** Resolves once listening, or once the first attempt failed (it keeps retrying in the background). */
  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    started.add(this);
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    started.delete(this);
    clearTimeout(this.reconnectTimer);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => {});
  }

  get listening(): boolean {
    return this.client !== undefined;
  }

  /**
   * How many processes of the database have claims waiting for work, and this one's rank among them
   * (db/queries/listener-roster.ts), as last read: every LISTENER_DEFAULTS.rosterIntervalMs once rosterKeep was
   * called, and at every (re)connect. Alone until the first reading, and while the connection is down.
   */
  get roster(): ListenerRoster {
    return this.client === undefined ? LISTENER_ROSTER_ALONE : this.rosterLast;
  }

  /**
   * Join the roster and keep it from now on (the process's waiting claims share READY hints by it): the connection
   * takes ROSTER_APPLICATION_NAME, and reads the roster once per interval.
   */
  rosterKeep(): void {
    if (this.rosterKept) return;
    this.rosterKept = true;
    this.rosterRefresh?.();
  }

  private notifyAll(channel?: string, payload?: string): void {
    for (const s of this.subscribers) if (channel === undefined || s.channel === undefined || s.channel === channel) s.fn(payload);
  }

  private async connect(): Promise<void> {
    const joined = this.rosterKept;
    const client = new pg.Client({
      connectionString: this.o.url, application_name: joined ? ROSTER_APPLICATION_NAME : LISTENER_APPLICATION_NAME,
      keepAlive: true, keepAliveInitialDelayMillis: LISTENER_DEFAULTS.keepaliveDelayMs, connectionTimeoutMillis: LISTENER_DEFAULTS.connectTimeoutMs,
      query_timeout: this.o.statementTimeoutMs ?? LISTENER_DEFAULTS.statementTimeoutMs,
    });
    const healthIntervalMs = this.o.healthIntervalMs ?? LISTENER_DEFAULTS.healthIntervalMs;
    const healthTimeoutMs = this.o.healthTimeoutMs ?? LISTENER_DEFAULTS.healthTimeoutMs;
    let lost = false;
    let health: NodeJS.Timeout | undefined;
    let rosterTimer: NodeJS.Timeout | undefined;
    let rosterStart: (() => void) | undefined;
    let pingSentAt: number | undefined;
    const onLost = (err?: Error) => {
      if (lost) return;
      lost = true;
      clearInterval(health);
      clearInterval(rosterTimer);
      if (rosterStart !== undefined && this.rosterRefresh === rosterStart) this.rosterRefresh = undefined;
      this.rosterLast = LISTENER_ROSTER_ALONE;
      if (this.client === client) this.client = undefined;
      // A half-open connection never answers a Terminate: cut the socket instead of waiting for end().
      (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
      client.end().catch(() => {});
      if (this.stopped) return;
      this.o.log?.warn({ err: err?.message }, 'ready listener lost its connection; reconnecting (agents poll meanwhile)');
      this.reconnectSchedule();
    };
    client.on('notification', (n) => {
      if (n.channel === this.pingChannel) pingSentAt = undefined;
      else this.notifyAll(n.channel, n.payload);
    });
    client.on('error', onLost);
    client.on('end', () => onLost());
    try {
      await client.connect();
      for (const ch of [...this.channels, this.pingChannel]) await client.query(`listen ${ch}`);
    } catch (err) {
      onLost(err as Error);
      return;
    }
    if (this.stopped) {
      await client.end().catch(() => {});
      return;
    }
    // A half-open connection never errors: only a ping of its own that goes unheard tells (LISTENER_DEFAULTS).
    health = setInterval(() => {
      if (pingSentAt !== undefined) {
        if (Date.now() - pingSentAt > healthTimeoutMs) onLost(new Error(`no answer to its health-check ping in ${healthTimeoutMs} ms (a half-open connection)`));
        return;
      }
      pingSentAt = Date.now();
      client.query(`notify ${this.pingChannel}`).catch((err: Error) => onLost(err));
    }, healthIntervalMs);
    health.unref();
    // A reading that fails keeps the last one: the health check, not the roster, decides that the connection is lost.
    const rosterRead = () => void listenerRosterRead(client, ROSTER_APPLICATION_NAME)
      .then((r) => { if (!lost) this.rosterLast = r; })
      .catch((err: Error) => this.o.log?.debug({ err: err.message }, 'listener roster not read; the last reading stands'));
    rosterStart = () => {
      if (rosterTimer !== undefined || lost) return;
      // Joined at connect when it was kept before; else now, and read once it has (one connection runs in order).
      if (!joined) client.query(listenerRosterJoinSql, [ROSTER_APPLICATION_NAME]).catch(() => {});
      rosterRead();
      rosterTimer = setInterval(rosterRead, this.o.rosterIntervalMs ?? LISTENER_DEFAULTS.rosterIntervalMs);
      rosterTimer.unref();
    };
    this.rosterRefresh = rosterStart;
    if (this.rosterKept) rosterStart();
    this.client = client;
    this.failures = 0;
    if (this.connectedOnce) {
      reconnectsTotal++;
      this.o.log?.info('ready listener reconnected');
    }
    this.connectedOnce = true;
    // Whatever became READY while we were not listening announced itself to nobody.
    this.notifyAll();
  }

  private reconnectSchedule(): void {
    const { reconnectMinMs, reconnectMaxMs } = LISTENER_DEFAULTS;
    const delay = Math.min(reconnectMaxMs, reconnectMinMs * 2 ** this.failures++) * (0.75 + Math.random() * 0.5);
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => void this.connect(), delay);
  }
}
