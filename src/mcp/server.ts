import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import type { Principal } from '../auth/tokens.js';
import { McpAgentSession } from './agent-session.js';
import type { ClaimWaiters } from '../claim-wait/waiters.js';
import { agentToolsRegister } from './agent-tools.js';
import { operatorToolsRegister } from './operator-tools.js';

export interface McpSession {
  server: McpServer;
  /** End the session: its heartbeats stop; what it held goes back through the reaper, or now given `release` (McpAgentSession.close). */
  close(o?: { release?: string }): Promise<void>;
}

/**
 * A dagent MCP server for one session, with the tools the token's role allows: an agent token works tasks as its
 * agent, within its grant; a submit, read or admin token looks and steers as it could over HTTP. The same server serves stdio (`dagent mcp`) and streamable HTTP (`/mcp` on `dagent up`).
 */
export function mcpSessionCreate(
  db: Db, principal: Principal, o: { log?: Logger; version: string; fileRoots: readonly string[]; maxQueued?: number; waiters: ClaimWaiters },
): McpSession {
  const server = new McpServer({ name: 'dagent', version: o.version }, {
    instructions: principal.role === 'agent'
      ? 'You are an agent in a dagent fleet. Call next_task to get work, do it, then complete (or fail, or release) it. Never retry a call that answered LEASE_LOST.'
      : 'dagent: DAGs of tasks worked by a fleet of agents.',
  });
  let session: McpAgentSession | undefined;
  if (principal.role === 'agent') {
    session = new McpAgentSession(db, principal, o.waiters, o.log);
    agentToolsRegister(server, session);
  } else operatorToolsRegister(server, principal, { db, log: o.log, fileRoots: o.fileRoots, maxQueued: o.maxQueued });
  return { server, close: async (c) => { await session?.close(c); } };
}
