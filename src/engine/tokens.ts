import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '../db/connection.js';
import { apiTokenFind, apiTokenInsert, apiTokenList, apiTokenRevoke, apiTokenTouch } from '../db/queries/api-tokens.js';
import { agentGet } from '../db/queries/agents.js';
import { InvalidInputError, NotFoundError } from '../errors.js';
import { newTokenId } from '../ids.js';

export const TOKEN_ROLES = ['admin', 'agent'] as const;
export type TokenRole = (typeof TOKEN_ROLES)[number];

/** Who a request acts as, once its bearer token checked out. */
export interface Principal { tokenId: string; role: TokenRole; agentId: string | null }

const TOKEN_PREFIX = 'dgt_';

export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * Create a token; the secret is returned once and only its hash is stored.
 * An agent token needs the agent it acts as; that agent need not be registered yet
 * (it registers itself with the token), so only the id's shape is checked.
 */
export async function tokenCreate(db: Db, o: { role: TokenRole; agentId?: string; name?: string }): Promise<{ id: string; token: string; role: TokenRole; agentId: string | null }> {
  if (!(TOKEN_ROLES as readonly string[]).includes(o.role)) throw new InvalidInputError(`--role ${o.role}: expected admin or agent`);
  if (o.role === 'agent' && !o.agentId) throw new InvalidInputError('an agent token needs --agent ID: it can only act as that agent');
  if (o.role === 'admin' && o.agentId) throw new InvalidInputError('--agent applies to agent tokens only');
  if (o.agentId && !/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/.test(o.agentId)) throw new InvalidInputError(`--agent ${o.agentId}: not a valid agent id`);
  const token = `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
  const row = await apiTokenInsert(db, { id: newTokenId(), role: o.role, agentId: o.agentId ?? null, name: o.name ?? null, tokenHash: tokenHash(token) });
  return { id: row.id, token, role: o.role, agentId: row.agentId };
}

/** The principal a presented token stands for, or null for an unknown or revoked one. */
export async function tokenVerify(db: Db, token: string): Promise<Principal | null> {
  if (!token.startsWith(TOKEN_PREFIX) || token.length > 200) return null;
  const row = await apiTokenFind(db, tokenHash(token));
  return row ? { tokenId: row.id, role: row.role as TokenRole, agentId: row.agentId } : null;
}

export const tokenList = apiTokenList;

/** Record that a request with this token succeeded (refused requests change nothing). */
export const tokenTouch = apiTokenTouch;

export async function tokenRevoke(db: Db, id: string): Promise<void> {
  if (!(await apiTokenRevoke(db, id))) throw new NotFoundError('live token', id);
}

/** For `dagent tokens create --agent`: warn (not refuse) when the agent is not registered yet. */
export async function tokenAgentKnown(db: Db, agentId: string): Promise<boolean> {
  return (await agentGet(db, agentId)) !== undefined;
}
