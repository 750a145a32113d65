import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { MCP_DEFAULTS } from '../../config/index.js';
import type { Principal } from '../../auth/tokens.js';
import { mcpSessionCreate, type McpSession } from '../../mcp/server.js';
import { packageVersion } from '../../package-root.js';
import { otherContent, route } from '../route.js';
import type { HttpDeps } from '../deps.js';

interface Live { transport: StreamableHTTPServerTransport; session: McpSession; tokenId: string; seenAt: number; unwatch: () => void }

/**
 * MCP over streamable HTTP at /mcp, behind the API's tokens: POST opens a session (initialize) or sends to one,
 * GET opens its server-to-client stream, DELETE ends it. A session belongs to the token that opened it.
 */
export function mcpRoutes(app: FastifyInstance, d: HttpDeps): void {
  const live = new Map<string, Live>();
  /** `release`: hand what the session holds back now (its token was revoked), not when its leases lapse. */
  const end = (id: string, release?: string) => {
    const l = live.get(id);
    if (!l) return;
    live.delete(id);
    l.unwatch();
    // Its waiting calls answer (with nothing) and what it holds is handed back; then its streams (GET /mcp) close,
    // once the answers are out (a turn of the event loop after the tools returned them).
    void (async () => {
      await l.session.close({ release }).catch((err) => d.log.warn({ err, sessionId: id }, 'MCP session did not end cleanly'));
      await new Promise((resolve) => setImmediate(resolve));
      await l.transport.close().catch(() => {});
    })();
  };
  const sweep = setInterval(() => {
    const idleBefore = Date.now() - MCP_DEFAULTS.idleSec * 1000;
    for (const [id, l] of live) if (l.seenAt < idleBefore) end(id);
  }, 60_000);
  sweep.unref();
  app.addHook('onClose', async () => {
    clearInterval(sweep);
    for (const id of [...live.keys()]) end(id);
  });

  /** The session a request names, if it is this token's; a JSON-RPC error reply otherwise (undefined: replied). */
  const sessionOf = (id: string, p: Principal, reply: FastifyReply): Live | undefined => {
    const l = live.get(id);
    if (!l || l.tokenId !== p.tokenId) {
      // Another token's session is as unknown to this one as a session that never was.
      void reply.status(404).send({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found: initialize a new one' }, id: null });
      return undefined;
    }
    l.seenAt = Date.now();
    return l;
  };

  route(app, {
    method: 'POST', url: '/mcp', access: 'mcp', tenants: 'filtered', tag: 'mcp',
    summary: 'MCP (streamable HTTP): initialize a session, or send to one (mcp-session-id); the tools are the token\'s role\'s',
    response: otherContent(['application/json', 'text/event-stream'], 'JSON-RPC over JSON or an SSE stream, as the MCP specification says'),
  }, async ({ req, reply, principal }) => {
    const sid = req.headers['mcp-session-id'];
    let l: Live | undefined;
    if (typeof sid === 'string') {
      l = sessionOf(sid, principal!, reply);
      if (!l) return;
    } else {
      const mine = [...live.values()].filter((x) => x.tokenId === principal!.tokenId).length;
      if (live.size >= MCP_DEFAULTS.sessionsMax || mine >= MCP_DEFAULTS.sessionsPerToken) {
        reply.header('retry-after', '60');
        return reply.status(503).send({ jsonrpc: '2.0', error: { code: -32000, message: `too many MCP sessions open${mine >= MCP_DEFAULTS.sessionsPerToken ? ' for this token' : ''}: close one (DELETE /mcp) or wait` }, id: null });
      }
      const session = mcpSessionCreate(d.db, principal!, { log: d.log, version: packageVersion(), fileRoots: d.fileRoots ?? [], maxQueued: d.maxQueued, waiters: d.claimWaiters });
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          // Revoking the token ends the session when the revocation commits: nothing more is claimed, beaten or said for it.
          const unwatch = d.revocations.watch(principal!.tokenId, () => end(id, 'its token was revoked'));
          live.set(id, { transport, session, tokenId: principal!.tokenId, seenAt: Date.now(), unwatch });
        },
        onsessionclosed: (id) => end(id),
      });
      transport.onclose = () => { if (transport.sessionId) end(transport.sessionId); else void session.close(); };
      await session.server.connect(transport);
      l = { transport, session, tokenId: principal!.tokenId, seenAt: Date.now(), unwatch: () => {} };
    }
    reply.hijack();
    await l.transport.handleRequest(req.raw, reply.raw, req.body);
  });

  for (const method of ['GET', 'DELETE'] as const) {
    route(app, {
      method, url: '/mcp', access: 'mcp', tenants: 'filtered', tag: 'mcp',
      summary: method === 'GET' ? 'MCP: the session\'s server-to-client stream (SSE)' : 'MCP: end the session (what it holds goes back through the reaper)',
      response: method === 'GET' ? otherContent(['text/event-stream'], 'the session\'s messages to the client') : otherContent([], 'the session is ended (no body)'),
    }, async ({ req, reply, principal }) => {
      const sid = req.headers['mcp-session-id'];
      if (typeof sid !== 'string') return reply.status(400).send({ jsonrpc: '2.0', error: { code: -32000, message: 'mcp-session-id header required' }, id: null });
      const l = sessionOf(sid, principal!, reply);
      if (!l) return;
      reply.hijack();
      await l.transport.handleRequest(req.raw, reply.raw);
    });
  }
}
