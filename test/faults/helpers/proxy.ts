import { createServer, type Server, type Socket } from 'node:net';
import { afterAll } from 'vitest';

/** What the proxy does with a connection's bytes. */
export type ProxyMode =
  /** Forward both ways. */
  | 'pass'
  /** Close every connection at once (a reset), and refuse new ones the same way. */
  | 'drop'
  /** Keep connections open but forward nothing and answer nothing: a half-open network (no reset ever arrives). */
  | 'blackhole';

export interface FaultProxy {
  /** `postgres://…` through the proxy: the same database and credentials as `targetUrl`, another port. */
  url: string;
  /** Change what happens to traffic from now on; 'drop' also cuts the connections already open. */
  set(mode: ProxyMode): void;
  /** Delay every chunk by this many milliseconds, both ways (0: none). */
  delay(ms: number): void;
  /** Connections accepted so far. */
  readonly accepted: number;
  close(): Promise<void>;
}

/**
 * A TCP proxy between one client and PostgreSQL that can pass, drop, black-hole
 * (half-open) and delay traffic, so a test can cut one process's connection
 * without touching the server or anyone else's. Closed after the file.
 */
export async function faultProxy(targetUrl: string): Promise<FaultProxy> {
  const target = new URL(targetUrl);
  const targetPort = Number(target.port || 5432);
  const targetHost = target.hostname;
  let mode: ProxyMode = 'pass';
  let delayMs = 0;
  let accepted = 0;
  const pairs = new Set<{ client: Socket; upstream: Socket }>();

  const forward = (from: Socket, to: Socket) => {
    from.on('data', (chunk) => {
      if (mode === 'blackhole') return; // swallowed: the peer waits for ever
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
    const pair = { client, upstream };
    pairs.add(pair);
    forward(client, upstream);
    forward(upstream, client);
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
    delay(ms) {
      delayMs = ms;
    },
    get accepted() {
      return accepted;
    },
    async close() {
      for (const p of [...pairs]) { p.client.destroy(); p.upstream.destroy(); }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  afterAll(() => proxy.close());
  return proxy;
}
