import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { errorMessage } from '../db/pg-errors.js';
import { apiTokensRevokedAmong } from '../db/queries/api-tokens.js';
import { ReadyListener } from '../db/ready-listener.js';
import { REVOKED_CHANNEL } from '../db/statement.js';

/**
 * How often a node asks which watched tokens were revoked while it hears no notifications (its LISTEN connection
 * is down): the bound on how long a revoked token's session or stream may outlive its revocation then.
 */
export const REVOCATION_POLL_MS = 2_000;

/**
 * What a node does for tokens revoked while something of theirs is open (an MCP session, an event stream, a long
 * poll). A revocation is pushed: the statement that revokes NOTIFYs REVOKED_CHANNEL with the token's id when it
 * commits, and the node's LISTEN connection hears it at once. On the same connection as the event stream's
 * notifications, so a stream hears of its token's revocation before any event committed after it. While that
 * connection is down, and once after it reconnects (notifications sent meanwhile are lost), the watched tokens are
 * read instead, every REVOCATION_POLL_MS.
 */
export class TokenRevocations {
  private readonly watchers = new Map<string, Set<() => void>>();
  private readonly listener: ReadyListener;
  private readonly ownListener: boolean;
  private unsubscribe: (() => void) | undefined;
  private poller: NodeJS.Timeout | undefined;
  private started: Promise<void> | undefined;

  /** `listener`: the node's LISTEN connection, which must listen to REVOKED_CHANNEL; default one of its own. */
  constructor(private readonly o: { db: Db; databaseUrl: string; log?: Logger; listener?: ReadyListener }) {
    this.ownListener = !o.listener;
    this.listener = o.listener ?? new ReadyListener({ url: o.databaseUrl, log: o.log, channels: [REVOKED_CHANNEL] });
    if (!this.listener.channels.includes(REVOKED_CHANNEL)) throw new Error(`the listener given to TokenRevocations must LISTEN to ${REVOKED_CHANNEL}`);
  }

  /**
   * Call `onRevoked` once when the token is revoked; returns the function that stops watching. Watching starts the
   * node's own listener on first use. `recheck` (default true): read the token once after watching starts, for a
   * revocation that committed between the request's token check and now (a long poll checks before each claim).
   */
  watch(tokenId: string, onRevoked: () => void, o: { recheck?: boolean } = {}): () => void {
    this.started ??= this.start();
    let set = this.watchers.get(tokenId);
    if (!set) this.watchers.set(tokenId, set = new Set());
    let fired = false;
    const once = () => {
      if (fired) return;
      fired = true;
      onRevoked();
    };
    set.add(once);
    if (o.recheck !== false) void this.started.then(() => this.poll([tokenId]), () => {});
    return () => {
      set.delete(once);
      if (set.size === 0 && this.watchers.get(tokenId) === set) this.watchers.delete(tokenId);
    };
  }

  async close(): Promise<void> {
    clearInterval(this.poller);
    this.unsubscribe?.();
    this.watchers.clear();
    if (this.ownListener) await this.listener.stop();
  }

  private async start(): Promise<void> {
    // A payload is a revoked token's id; none means the connection was (re)made and what was missed must be read.
    this.unsubscribe = this.listener.subscribe((payload) => {
      if (payload) this.revoked(payload);
      else void this.poll();
    }, REVOKED_CHANNEL);
    this.poller = setInterval(() => { if (!this.listener.listening) void this.poll(); }, REVOCATION_POLL_MS);
    this.poller.unref();
    if (this.ownListener) await this.listener.start();
  }

  private async poll(ids: readonly string[] = [...this.watchers.keys()]): Promise<void> {
    if (ids.length === 0) return;
    try {
      for (const id of await apiTokensRevokedAmong(this.o.db, ids)) this.revoked(id);
    } catch (err) {
      this.o.log?.warn({ err: errorMessage(err) }, 'could not read which tokens were revoked; will try again');
    }
  }

  private revoked(tokenId: string): void {
    const set = this.watchers.get(tokenId);
    if (!set) return;
    this.watchers.delete(tokenId);
    for (const fn of set) {
      try {
        fn();
      } catch (err) {
        this.o.log?.warn({ err: errorMessage(err), tokenId }, 'ending a revoked token\'s session failed');
      }
    }
  }
}
