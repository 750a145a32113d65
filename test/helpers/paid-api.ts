import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll } from 'vitest';

/** A call the paid API answered: its path, and the agent that made it (the request's x-agent header). */
export interface PaidCall { path: string; agent: string }

/** A request the test chose to hold: `arrived` resolves once it came, `answer` lets it through. */
export interface HeldRequest { arrived: Promise<void>; answer(): void }

export interface PaidApi {
  /** Where agents reach it; the stepper fixtures read it from DAGENT_TEST_PAID_API. */
  url: string;
  /** The calls (paths under /call/) it answered, in the order it answered them; a held call counts once answered. */
  calls: PaidCall[];
  /** The next request to `path` is held until the test answers it. */
  hold(path: string): HeldRequest;
  /** Forgets the calls and the holds, for beforeEach. */
  reset(): void;
}

/**
 * A local server standing for an expensive API that durable steps must not call twice: it answers every request with
 * `{ answer: <path> }` and counts the calls to /call/… (/checkpoint/… requests are answered, not counted: they only
 * mark a point where a test may hold the agent). Closed after the test file.
 */
export async function paidApiStart(): Promise<PaidApi> {
  const calls: PaidCall[] = [];
  const holds = new Map<string, { arrived: () => void; req?: IncomingMessage; res?: ServerResponse }>();
  const answer = (req: IncomingMessage, res: ServerResponse): void => {
    const path = req.url!;
    if (path.startsWith('/call/')) calls.push({ path, agent: String(req.headers['x-agent']) });
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ answer: path }));
  };
  const server = createServer((req, res) => {
    const held = holds.get(req.url!);
    if (held && !held.res) {
      Object.assign(held, { req, res });
      held.arrived();
      return;
    }
    answer(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    hold(path) {
      let arrived!: () => void;
      const came = new Promise<void>((r) => (arrived = r));
      const held: { arrived: () => void; req?: IncomingMessage; res?: ServerResponse } = { arrived };
      holds.set(path, held);
      return {
        arrived: came,
        answer: () => {
          if (!held.req || !held.res) throw new Error(`paid API: no request to ${path} is held yet; await its arrival first`);
          answer(held.req, held.res);
        },
      };
    },
    reset() {
      calls.length = 0;
      holds.clear();
    },
  };
}
