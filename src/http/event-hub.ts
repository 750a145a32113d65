import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { dagChangedSince } from '../db/queries/dags.js';
import { eventListAfter, eventMaxId } from '../db/queries/events.js';
import { EVENTS_CHANNEL, READY_CHANNEL } from '../db/statement.js';
import { taskStatesForDag } from '../db/queries/tasks-read.js';
import { ReadyListener } from '../db/ready-listener.js';
import { SingleFlight } from '../event-loop.js';

export interface StreamEvent { type: string; data: Record<string, unknown> }

export interface Subscriber {
  /** Only this DAG's events (and its tasks' state changes). Default: every event, and DAG progress. */
  dagId?: string;
  /** Only these tenants' events (a token scoped to them: events of no DAG are not theirs either); null or absent: every event. */
  tenants?: readonly string[] | null;
  send(e: StreamEvent): void;
}

type TaskState = Awaited<ReturnType<typeof taskStatesForDag>>[number];

/**
 * Feeds the server-sent-events stream. One LISTEN connection (the events
 * trigger's channel and the READY channel) wakes it; a poll every `pollMs`
 * is the fallback and catches what NOTIFY does not carry. Each wake reads:
 *  - new rows of `events` (failures, dead letters, spawns, DAG completion …), sent as they are;
 *  - for each watched DAG, its tasks' states, sent as `task.status` when they changed
 *    (claims, starts and completions write no event row: the hot path stays lean);
 *  - DAGs whose row changed (status, open tasks, spend), sent as `dag.progress` to unfiltered subscribers and that DAG's watchers.
 * It runs only while somebody is subscribed, on one LISTEN connection however many
 * subscribe at once (the process's own when it is given one).
 */
export class EventHub {
  private readonly subs = new Set<Subscriber>();
  private listener: ReadyListener | undefined;
  private timer: NodeJS.Timeout | undefined;
  private cursor = 0;
  /** Events up to here existed before the first subscriber: never sent. */
  private floor = 0;
  /** Ids sent recently: each read looks back LOOKBACK ids, since a lower id can commit after a higher one. */
  private readonly seen = new Set<number>();
  private readonly dagStates = new Map<string, Map<string, TaskState>>();
  private dagsSince = new Date();
  /** What was last sent per DAG, so the read's overlap window does not repeat it. */
  private readonly dagSent = new Map<string, string>();
  private readonly reads = new SingleFlight(() => this.read(), () => !this.closed, (err) => this.o.log?.warn({ err }, 'event stream read failed; next wake retries'));
  private closed = false;
  /** Set while the first subscriber's start is under way: later subscribers wait on it instead of starting again. */
  private starting: Promise<void> | undefined;
  private active = false;
  private unlisten: (() => void) | undefined;

  /** `listener`: the process's LISTEN connection (on the READY and events channels); without one the hub opens its own. */
  constructor(private readonly o: { db: Db; databaseUrl: string; log?: Logger; pollMs?: number; listener?: ReadyListener }) {}

  get subscribers(): number {
    return this.subs.size;
  }

  async subscribe(s: Subscriber): Promise<() => void> {
    // Registered at once (so a stop cannot race this start), but what reaches it waits
    // until it is running and, for a DAG's watcher, until its snapshot went first.
    const held: StreamEvent[] = [];
    let ready = false;
    const sub: Subscriber = { dagId: s.dagId, tenants: s.tenants, send: (e) => (ready ? s.send(e) : held.push(e)) };
    this.subs.add(sub);
    if (!this.active) {
      this.starting ??= this.begin().then(() => { this.active = true; }).finally(() => { this.starting = undefined; });
      await this.starting;
    }
    if (s.dagId) {
      const states = await this.dagSnapshot(s.dagId);
      s.send({ type: 'snapshot', data: { dagId: s.dagId, tasks: [...states.values()] } });
    }
    ready = true;
    // Events from before the snapshot that it already shows would repeat; a DAG's watcher gets only those after it.
    for (const e of held) if (!(s.dagId && e.type === 'task.status')) s.send(e);
    return () => {
      this.subs.delete(sub);
      if (s.dagId && ![...this.subs].some((x) => x.dagId === s.dagId)) this.dagStates.delete(s.dagId);
      if (this.subs.size === 0) void this.end();
    };
  }

  /** Read now (also what a NOTIFY or the poll does). Single-flight; a wake during a read runs one more. */
  wake(): Promise<void> {
    return this.reads.wake();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const s of this.subs) s.send({ type: 'close', data: {} });
    this.subs.clear();
    await this.end();
  }

  private async begin(): Promise<void> {
    this.cursor = await eventMaxId(this.o.db);
    this.floor = this.cursor;
    this.dagsSince = new Date();
    if (this.o.listener) {
      this.unlisten = this.o.listener.subscribe(() => void this.wake());
    } else {
      this.listener = new ReadyListener({ url: this.o.databaseUrl, log: this.o.log, channels: [EVENTS_CHANNEL, READY_CHANNEL] });
      this.listener.subscribe(() => void this.wake());
      await this.listener.start();
    }
    this.timer = setInterval(() => void this.wake(), this.o.pollMs ?? 1000);
    this.timer.unref();
  }

  private async end(): Promise<void> {
    await this.starting;
    if (this.subs.size > 0) return; // someone subscribed meanwhile
    this.active = false;
    clearInterval(this.timer);
    this.timer = undefined;
    this.unlisten?.();
    this.unlisten = undefined;
    const l = this.listener;
    this.listener = undefined;
    await l?.stop();
    await this.reads.current;
  }

  private async read(): Promise<void> {
    if (this.subs.size === 0) return;
    const rows = await eventListAfter(this.o.db, Math.max(0, this.cursor - LOOKBACK));
    for (const r of rows) {
      if (r.id <= this.floor || this.seen.has(r.id)) continue;
      this.seen.add(r.id);
      this.cursor = Math.max(this.cursor, r.id);
      this.broadcast({ type: r.type, data: { id: r.id, at: r.at, dagId: r.dagId, taskId: r.taskId, agentId: r.agentId, ...(r.data as Record<string, unknown>) } }, r.dagId, r.tenantId);
    }
    for (const id of this.seen) if (id <= this.cursor - LOOKBACK) this.seen.delete(id);

    for (const dagId of new Set([...this.subs].map((s) => s.dagId).filter((x): x is string => !!x))) {
      const before = this.dagStates.get(dagId) ?? new Map<string, TaskState>();
      let now: Map<string, TaskState>;
      try {
        now = await this.dagSnapshot(dagId);
      } catch (err) {
        // One DAG's read failing never holds up the others' (nor the events already sent).
        this.o.log?.warn({ err, dagId }, 'event stream could not read a DAG\'s tasks; next wake retries');
        continue;
      }
      for (const [id, t] of now) {
        const was = before.get(id);
        if (!was || was.status !== t.status || was.attempts !== t.attempts || was.progress !== t.progress) {
          // Only the DAG's watchers get these, each of whom was let watch it (its tenant checked) when it subscribed.
          this.broadcast({ type: 'task.status', data: { dagId, taskId: id, key: t.key, status: t.status, previous: was?.status ?? null, attempts: t.attempts, claimedBy: t.claimedBy, progress: t.progress } }, dagId, null, 'watchers');
        }
      }
    }

    {
      const changed = await dagChangedSince(this.o.db, new Date(this.dagsSince.getTime() - 1000));
      for (const d of changed) {
        if (d.updatedAt > this.dagsSince) this.dagsSince = d.updatedAt;
        const sig = `${d.status}/${d.tasksOpen}/${d.spentUsd}`;
        if (this.dagSent.get(d.id) === sig) continue;
        this.dagSent.set(d.id, sig);
        if (this.dagSent.size > 10_000) this.dagSent.clear();
        this.broadcast({ type: 'dag.progress', data: { dagId: d.id, name: d.name, status: d.status, tasksTotal: d.tasksTotal, tasksOpen: d.tasksOpen, spentUsd: d.spentUsd } }, d.id, d.tenantId);
      }
    }
  }

  private async dagSnapshot(dagId: string): Promise<Map<string, TaskState>> {
    const states = new Map((await taskStatesForDag(this.o.db, dagId)).map((t) => [t.id, t]));
    this.dagStates.set(dagId, states);
    return states;
  }

  /**
   * `to`: everyone whose filter matches (unfiltered subscribers and the DAG's watchers, each within its tenants), or only
   * the DAG's watchers. `tenant`: the event's (its DAG's); null for an event of no DAG, which no scoped subscriber gets.
   */
  private broadcast(e: StreamEvent, dagId: string | null, tenant: string | null, to: 'matching' | 'watchers' = 'matching'): void {
    for (const s of this.subs) {
      const ok = to === 'watchers' ? s.dagId === dagId
        : (!s.dagId || s.dagId === dagId) && (!s.tenants || (tenant !== null && s.tenants.includes(tenant)));
      if (ok) s.send(e);
    }
  }
}

const LOOKBACK = 100;
