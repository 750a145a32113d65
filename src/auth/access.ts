import type { TokenRole } from './tokens.js';

/** Who may call a route: anyone (public), or the token roles ACCESS_ROLES lists for it. */
export type Access = 'public' | 'read' | 'submit' | 'signal' | 'admin' | 'agent' | 'holder' | 'mcp' | 'token';

/** The roles each access level admits: the one table of who may call what. */
export const ACCESS_ROLES: Record<Exclude<Access, 'public'>, readonly TokenRole[]> = {
  /** The read-only routes: DAGs, tasks, dead letters, agents, stats, spend, the event stream, metrics. */
  read: ['admin', 'submit', 'read'],
  /** Submitting DAGs: a DAG author. */
  submit: ['admin', 'submit'],
  /** Sending signals to waiting tasks: what a CI system or another service holds, and nothing else. */
  signal: ['admin', 'signal'],
  /** Changing what runs: cancel, priorities, dead-letter retries and edits. */
  admin: ['admin'],
  /** The agent protocol: an agent token as its own agent, or an admin as any. */
  agent: ['admin', 'agent'],
  /**
   * What a task's attempts recorded (its durable steps): the readers, and an agent token for a task its agent holds
   * (the route checks the hold, under the fence it presents), so an agent replays a step before it runs it again.
   */
  holder: ['admin', 'submit', 'read', 'agent'],
  /** The MCP server: each token gets the tools its role allows (an agent's to work tasks; the others' to look and steer). */
  mcp: ['admin', 'submit', 'read', 'agent'],
  /** Any valid token: who it is (GET /api/whoami). */
  token: ['admin', 'submit', 'read', 'signal', 'agent'],
};

/** Whether a token of this role may do what `access` guards. */
export function accessAllows(access: Exclude<Access, 'public'>, role: TokenRole): boolean {
  return (ACCESS_ROLES[access] as readonly TokenRole[]).includes(role);
}

/**
 * Which tenant's objects a route reaches, so a token scoped to tenants (Principal.tenants) reaches its own only. Every
 * route declares one:
 * - `{ dag | task | deadLetter: [params] }`: the path params that name such objects; for a scoped token, one of another
 *   tenant is answered exactly as one that does not exist (a 404), before the handler runs;
 * - `filtered`: the handler keeps to the token's tenants itself (lists, counts, streams, metrics, submit, signals, MCP);
 * - `deployment`: settings of the whole deployment (rate limits): a scoped token is refused (403);
 * - `agent`: the agent protocol's routes that name no task (register, claim), where the agent token's grant decides
 *   (those that name one declare `task`: a scoped agent token's report on another tenant's task is a 404); a scoped
 *   token of another role may not act as an agent on any (403);
 * - `none`: no tenant's objects (who am I, the OpenAPI document, health, the dashboard's files).
 */
export type TenantReach =
  | { readonly dag: readonly string[] } | { readonly task: readonly string[] } | { readonly deadLetter: readonly string[] }
  | 'filtered' | 'deployment' | 'agent' | 'none';

/** The NotFoundError kind a handler answers for each object kind: a scoped token's 404 reads the same. */
export const TENANT_OWNED_LABEL = { dag: 'DAG', task: 'task', deadLetter: 'dead letter' } as const;
