import { createServer, type Server, type Socket } from 'node:net';
import { afterAll } from 'vitest';

/** What the proxy does with a connection's bytes. */
export type ProxyMode =
  /** Forward both ways. */
  | 'pass'
  /** Close every connection at once (a reset), and refuse new ones the same way. */
  | 'drop'
  /** Keep connections open but forward nothing and answer nothing: a half-open network (no reset ever arrives). */
  | 'blackhole'
  /**
   * Forward what the client sends, swallow what the server answers: a statement commits but its reply is
   * lost. Connections that LISTEN are left alone, so notifications still arrive and wake the client.
   */
  | 'mute';

export interface FaultProxy {
  /** `postgres://…` through the proxy: the same database and credentials as `targetUrl`, another port. */
  url: string;
  /** Change what happens to traffic from now on; 'drop' also cuts the connections already open. */
  set(mode: ProxyMode): void;
  /**
   * Black-hole the connections that LISTEN now, both ways, for good: a half-open LISTEN connection
   * (no reset ever arrives). Every other connection, and every new one, passes.
   */
  freezeListening(): void;
  /**
   * While on, a connection that sends LISTEN is black-holed from that moment, both ways, for good: its LISTEN is never
   * answered (a server, proxy or NAT that swallows it). Connections that do not LISTEN pass.
   */
  swallowListens(on: boolean): void;
  /**
   * Send new connections to another server from now on (a virtual IP or DNS name moved to a promoted standby);
   * connections already open stay where they are.
   */
  retarget(url: string): void;
  /** Delay every chunk by this many milliseconds, both ways (0: none). */
  delay(ms: number): void;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** What each connection accepted so far sent to the server (its whole byte stream, closed connections included). */
  sent(): Buffer[];
  /** The client ports PostgreSQL sees (pg_stat_activity.client_port) for the open connections that do not LISTEN. */
  backendPorts(): number[];
  close(): Promise<void>;
}

/**
 * A TCP proxy between one client and PostgreSQL that can pass, drop, black-hole
 * (half-open) and delay traffic, so a test can cut one process's connection
 * without touching the server or anyone else's. Closed after the file.
 */
export async function faultProxy(targetUrl: string): Promise<FaultProxy> {
  const target = new URL(targetUrl);
  let targetPort = Number(target.port || 5432);
  let targetHost = target.hostname;
  let mode: ProxyMode = 'pass';
  let swallowing = false;
  let delayMs = 0;
  let accepted = 0;
  const pairs = new Set<{ client: Socket; upstream: Socket; listens: boolean; frozen: boolean }>();
  const sentBy: Buffer[][] = [];

  const forward = (from: Socket, to: Socket, toClient: boolean, pair: { listens: boolean; frozen: boolean; sent: Buffer[] }) => {
    from.on('data', (chunk) => {
      if (!toClient) pair.sent.push(chunk);
      if (mode === 'blackhole' || pair.frozen) return; // swallowed: the peer waits for ever
      if (!toClient && /\bLISTEN\s/i.test(chunk.toString('latin1'))) {
        pair.listens = true;
        if (swallowing) { pair.frozen = true; return; }
      }
      if (mode === 'mute' && toClient && !pair.listens) return; // the server's answers are lost
      if (delayMs > 0) setTimeout(() => to.writable && to.write(chunk), delayMs);
      else if (to.writable) to.write(chunk);
    });
  };

  const server: Server = createServer((client) => {
    accepted++;
    if (mode === 'drop') {
      client.resetAndDestroy();
      return;
    }
    const upstream = new (client.constructor as typeof Socket)();
    upstream.connect(targetPort, targetHost);
    const pair = { client, upstream, listens: false, frozen: false, sent: [] as Buffer[] };
    sentBy.push(pair.sent);
    pairs.add(pair);
    forward(client, upstream, false, pair);
    forward(upstream, client, true, pair);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', end);
    upstream.on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const url = new URL(targetUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);

  const proxy: FaultProxy = {
    url: url.toString(),
    set(next) {
      mode = next;
      if (next === 'drop') for (const p of [...pairs]) { p.client.resetAndDestroy(); p.upstream.destroy(); }
    },
    freezeListening() {
      for (const p of pairs) if (p.listens) p.frozen = true;
    },
    swallowListens(on) {
      swallowing = on;
    },
    retarget(next) {
      const u = new URL(next);
      targetPort = Number(u.port || 5432);
      targetHost = u.hostname;
    },
    delay(ms) {
      delayMs = ms;
    },
    get accepted() {
      return accepted;
    },
    sent() {
      return sentBy.map((chunks) => Buffer.concat(chunks));
    },
    backendPorts() {
      return [...pairs].filter((p) => !p.listens && p.upstream.localPort !== undefined).map((p) => p.upstream.localPort!);
    },
    async close() {
      for (const p of [...pairs]) { p.client.destroy(); p.upstream.destroy(); }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  afterAll(() => proxy.close());
  return proxy;
}
