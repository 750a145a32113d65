import type { ServerResponse } from 'node:http';

/** Server-sent events, as the event stream and task streams answer them. */

/** Comment lines keep idle proxies (and the browser) from closing a quiet stream. */
export const SSE_KEEPALIVE_MS = 15_000;

/** Open `res` as an event stream: the headers (no buffering by a proxy), then the reconnect delay a browser waits. */
export function sseOpen(res: ServerResponse): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.write('retry: 2000\n\n');
}

/** A keepalive comment every SSE_KEEPALIVE_MS while nothing else waits to be sent; returns the function that stops it. */
export function sseKeepalive(res: ServerResponse): () => void {
  const t = setInterval(() => { if (!res.destroyed && res.writableLength === 0) res.write(': keepalive\n\n'); }, SSE_KEEPALIVE_MS);
  return () => clearInterval(t);
}
