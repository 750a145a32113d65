import pg from 'pg';

// 53300 too_many_connections, 57P03 cannot_connect_now (starting up or in recovery): the server answered, but
// has no room for this connection yet. A moment later it usually has: other clients' pools shrink, and a server
// that is starting finishes.
const REFUSED_FOR_NOW = new Set(['53300', '57P03']);

function refusedForNow(e: unknown): boolean {
  return REFUSED_FOR_NOW.has((e as { code?: string } | undefined)?.code ?? '');
}

type ConnectCallback = (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void;

/**
 * A pool whose new connections wait for room at the server: a connection the server refuses for now (too many
 * clients, starting up) is asked for again, backing off from 50 ms to 1 s, until the pool's connect timeout has
 * passed; then the server's own error is thrown. A one-shot command started while the server is full waits for a
 * connection rather than failing halfway through, with some of its statements run and others not; a node's loops
 * would have retried anyway. Every other error is thrown at once.
 */
export class PatientPool extends pg.Pool {
  override connect(): Promise<pg.PoolClient>;
  override connect(callback: ConnectCallback): void;
  override connect(callback?: ConnectCallback): Promise<pg.PoolClient> | void {
    const budgetMs = this.options.connectionTimeoutMillis || 10_000;
    const started = Date.now();
    const once = () => new Promise<pg.PoolClient>((resolve, reject) => {
      super.connect((err, client) => (err ? reject(err) : resolve(client!)));
    });
    const connected = (async () => {
      for (let waitMs = 50; ; waitMs = Math.min(waitMs * 2, 1000)) {
        try {
          return await once();
        } catch (e) {
          if (!refusedForNow(e) || this.ending || Date.now() - started + waitMs > budgetMs) throw e;
          await new Promise((r) => setTimeout(r, waitMs));
        }
      }
    })();
    if (!callback) return connected;
    connected.then(
      (client) => callback(undefined, client, (release) => client.release(release as boolean | Error | undefined)),
      (err: Error) => callback(err, undefined, () => {}),
    );
  }
}
