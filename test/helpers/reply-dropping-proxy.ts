import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll } from 'vitest';

/** One exchange the proxy forwarded: the request, the body it carried, the server's reply, and whether the reply was lost. */
export interface ProxiedExchange { req: IncomingMessage; sent: Buffer; status: number; reply: Buffer; replyLost: boolean }

/**
 * Between an agent and the server at `target`: forwards every request and its reply, except a reply `drop` picks,
 * which it reads from the server (what the request wrote has landed) and then loses by destroying the agent's
 * connection: the lost reply a client must retry without doing the work twice. `seen` is told of every exchange.
 * Closed after the test file.
 */
export async function replyDroppingProxy(target: string, o: { drop: (req: IncomingMessage) => boolean; seen?: (x: ProxiedExchange) => void }): Promise<{ url: string }> {
  const proxy = createServer((req, res) => {
    const replyLost = o.drop(req);
    const sent: Buffer[] = [];
    req.on('data', (c: Buffer) => sent.push(c));
    const upstream = httpRequest(`${target}${req.url}`, { method: req.method, headers: req.headers }, (reply) => {
      const chunks: Buffer[] = [];
      reply.on('data', (c: Buffer) => chunks.push(c));
      reply.on('end', () => {
        o.seen?.({ req, sent: Buffer.concat(sent), status: reply.statusCode!, reply: Buffer.concat(chunks), replyLost });
        if (replyLost) {
          req.socket.destroy();
          return;
        }
        res.writeHead(reply.statusCode!, reply.headers);
        res.end(Buffer.concat(chunks));
      });
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  afterAll(() => {
    proxy.closeAllConnections();
    return new Promise<void>((r) => proxy.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` };
}
