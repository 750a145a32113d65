import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '../db/handle.js';
import { apiTokenFind, apiTokenInsert, apiTokenList, apiTokenLive, apiTokenRevoke, apiTokenTouch, type ApiTokenRow } from '../db/queries/api-tokens.js';
import { agentGet } from '../db/queries/agents.js';
import { CAPABILITY_PATTERN } from '../dag/file-schema.js';
import { agentModelSchema } from '../llm-models.js';
import { ForbiddenError, InvalidInputError, NotFoundError } from '../errors.js';
import { newTokenId } from '../ids.js';
import { AGENT_TOKEN_DEFAULTS, tenantIdSchema } from '../config/index.js';
import { tenantKnown } from '../db/queries/tenants.js';

/**
 * What a token may call. admin: everything, and any agent's calls. submit: submit DAGs
 * and read. read: the read-only routes (DAGs, tasks, dead letters, agents, stats, the
 * event stream, metrics). signal: send signals to waiting tasks, nothing else (a CI system's token).
 * agent: the agent protocol, as its one agent, within its grant.
 */
export const TOKEN_ROLES = ['admin', 'submit', 'read', 'signal', 'agent'] as const;
export type TokenRole = (typeof TOKEN_ROLES)[number];

/** The capability prefix of validation tasks: granted to agent tokens only through `validators`. */
export const VALIDATOR_PREFIX = 'validate:';

/** What an agent token may register: its capabilities come from here, never from the agent. */
export interface Grant {
  /** Capabilities it may register; null for a token made before grants existed: any but validator ones. */
  capabilities: string[] | null;
  /** Validator capabilities it may register, without the prefix (`test` for validate:test). */
  validators: string[];
  /** Models it may register (`*`: any); null for a token made before models were granted: any. */
  models: string[] | null;
  /** Most budget it may register (a registration without one gets this); null: no ceiling. */
  budgetUsd: number | null;
  /** Most tasks at once it may register; null: no ceiling. */
  maxConcurrent: number | null;
}

/**
 * Who a request acts as, once its bearer token checked out. `tenants`: the tenants it reads and acts on (an agent
 * token: those its agent may serve); null: every tenant. Another tenant's objects do not exist for it.
 */
export interface Principal { tokenId: string; role: TokenRole; agentId: string | null; grant: Grant | null; tenants: readonly string[] | null }

const TOKEN_PREFIX = 'dgt_';

export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * Create a token; the secret is returned once and only its hash is stored.
 * An agent token needs the agent it acts as; that agent need not be registered yet
 * (it registers itself with the token), so only the id's shape is checked.
 */
export interface TokenCreate {
  role: TokenRole;
  /** Agent tokens: the agent it acts as. */
  agentId?: string;
  name?: string;
  /** Agent tokens: the capabilities it may register (default none: least privilege). */
  capabilities?: string[];
  /** Agent tokens: validator capabilities it may register, without the prefix (`test`, `judge`). */
  validators?: string[];
  /** Agent tokens: the models it may register (`*`: any; default none: it works tasks that name no model). */
  models?: string[];
  budgetUsd?: number;
  maxConcurrent?: number;
  /**
   * The tenants it reads and acts on, each of which must exist (an agent token: the tenants its agent may serve);
   * default every tenant. A token scoped to tenants finds no other tenant's objects (a 404), and cannot manage tenants.
   */
  tenants?: string[];
}

export async function tokenCreate(db: Db, o: TokenCreate): Promise<{ id: string; token: string; role: TokenRole; agentId: string | null; grant: Grant | null; tenants: string[] | null }> {
  if (!(TOKEN_ROLES as readonly string[]).includes(o.role)) throw new InvalidInputError(`--role ${o.role}: expected one of ${TOKEN_ROLES.join(', ')}`);
  if (o.role === 'agent' && !o.agentId) throw new InvalidInputError('an agent token needs --agent ID: it can only act as that agent');
  const grantGiven = o.capabilities !== undefined || o.validators !== undefined || o.models !== undefined || o.budgetUsd !== undefined || o.maxConcurrent !== undefined;
  if (o.role !== 'agent' && (o.agentId || grantGiven)) throw new InvalidInputError('--agent, --capabilities, --validators, --models, --budget-usd and --max-concurrent apply to agent tokens only');
  if (o.agentId && !/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/.test(o.agentId)) throw new InvalidInputError(`--agent ${o.agentId}: not a valid agent id`);
  const capabilities = [...new Set(o.capabilities ?? [])];
  for (const c of capabilities) {
    if (c.startsWith(VALIDATOR_PREFIX)) throw new InvalidInputError(`--capabilities ${c}: validator capabilities are a separate grant: --validators ${c.slice(VALIDATOR_PREFIX.length)}`);
    if (!CAPABILITY_PATTERN.test(c)) throw new InvalidInputError(`--capabilities ${c}: not a capability (lowercase, digits, _ and -, one optional namespace:)`);
  }
  const validators = [...new Set(o.validators ?? [])];
  for (const v of validators) if (!/^[a-z][a-z0-9_-]{0,63}$/.test(v)) throw new InvalidInputError(`--validators ${v}: expected a validator name such as test or judge`);
  const models = [...new Set(o.models ?? [])];
  for (const m of models) if (!agentModelSchema.safeParse(m).success) throw new InvalidInputError(`--models ${m}: expected a model name such as openai/gpt-4o (letters, digits and . _ : / @ + -), or * for any`);
  if (o.budgetUsd !== undefined && !(o.budgetUsd >= 0)) throw new InvalidInputError(`--budget-usd ${o.budgetUsd}: expected a number ≥ 0`);
  if (o.maxConcurrent !== undefined && !(Number.isInteger(o.maxConcurrent) && o.maxConcurrent >= 1)) throw new InvalidInputError(`--max-concurrent ${o.maxConcurrent}: expected a whole number ≥ 1`);
  const tenants = o.tenants === undefined ? null : [...new Set(o.tenants)];
  if (tenants && tenants.length === 0) throw new InvalidInputError('--tenants: name at least one tenant (leave it out for every tenant)');
  for (const t of tenants ?? []) {
    if (!tenantIdSchema.safeParse(t).success) throw new InvalidInputError(`--tenants ${t}: not a tenant id (lowercase letters, digits, _ and -)`);
    if (!(await tenantKnown(db, t))) throw new InvalidInputError(`--tenants ${t}: no such tenant (dagent tenants create ${t})`);
  }
  const token = `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
  const isAgent = o.role === 'agent';
  const row = await apiTokenInsert(db, {
    id: newTokenId(), role: o.role, agentId: o.agentId ?? null, name: o.name ?? null, tokenHash: tokenHash(token),
    grantCapabilities: isAgent ? capabilities : null, grantValidators: isAgent ? validators : [], grantModels: isAgent ? models : null,
    grantBudgetUsd: o.budgetUsd ?? null, grantMaxConcurrent: o.maxConcurrent ?? null, tenants,
  });
  return { id: row.id, token, role: o.role, agentId: row.agentId, grant: grantOf(row), tenants: row.tenants };
}

function grantOf(row: Pick<ApiTokenRow, 'role' | 'grantCapabilities' | 'grantValidators' | 'grantModels' | 'grantBudgetUsd' | 'grantMaxConcurrent'>): Grant | null {
  if (row.role !== 'agent') return null;
  return {
    capabilities: row.grantCapabilities, validators: row.grantValidators, models: row.grantModels,
    budgetUsd: row.grantBudgetUsd === null ? null : Number(row.grantBudgetUsd), maxConcurrent: row.grantMaxConcurrent,
  };
}

/** Whether a grant covers one capability: validator ones only through `validators`. */
export function grantCovers(g: Grant, capability: string): boolean {
  if (capability.startsWith(VALIDATOR_PREFIX)) return g.validators.includes(capability.slice(VALIDATOR_PREFIX.length));
  return g.capabilities === null || g.capabilities.includes(capability);
}

/** Whether a grant covers one model an agent registers (`*` only through a grant of `*`). */
export function grantCoversModel(g: Grant, model: string): boolean {
  return g.models === null || g.models.includes('*') || g.models.includes(model);
}

/**
 * What an agent token may register: capabilities only from its grant (validator ones
 * only from its validator grant), models only from its grant, budget and concurrency within its ceilings (a budget
 * left out is the ceiling). Returns the registration to store, or refuses with the reason.
 */
export function grantApply<R extends { capabilities: string[]; models?: string[]; budgetUsd?: number | null; maxConcurrent?: number; tenants?: string[] | null }>(p: Principal, reg: R): R {
  if (p.tenants) {
    // A token scoped to tenants registers an agent for those tenants only: none named is all of them.
    const beyondTenants = (reg.tenants ?? []).filter((t) => !p.tenants!.includes(t));
    if (beyondTenants.length) {
      throw new ForbiddenError(`token ${p.tokenId} does not grant the tenants ${beyondTenants.join(', ')}: an agent serves the tenants its token grants (dagent tokens create --tenants)`, { tenants: beyondTenants });
    }
    if (!reg.tenants) reg = { ...reg, tenants: [...p.tenants] };
  }
  if (p.role !== 'agent' || !p.grant) return reg;
  const g = p.grant;
  const modelsBeyond = (reg.models ?? []).filter((m) => !grantCoversModel(g, m));
  if (modelsBeyond.length) {
    throw new ForbiddenError(`token ${p.tokenId} does not grant the models ${modelsBeyond.join(', ')}: models are granted to a token (dagent tokens create --models), not claimed by its agent`, { models: modelsBeyond });
  }
  const beyond = reg.capabilities.filter((c) => !grantCovers(g, c));
  if (beyond.length) {
    const validator = beyond.some((c) => c.startsWith(VALIDATOR_PREFIX));
    throw new ForbiddenError(`token ${p.tokenId} does not grant ${beyond.join(', ')}${validator ? ' (validator capabilities are a separate grant, given only by an operator)' : ''}: capabilities are granted to a token, not claimed by its agent`, { capabilities: beyond });
  }
  let budgetUsd = reg.budgetUsd;
  if (g.budgetUsd !== null) {
    if (budgetUsd === undefined || budgetUsd === null) budgetUsd = g.budgetUsd;
    else if (budgetUsd > g.budgetUsd) throw new ForbiddenError(`token ${p.tokenId} allows a budget of at most ${g.budgetUsd} USD, not ${budgetUsd}`, { budgetUsd });
  }
  let maxConcurrent = reg.maxConcurrent;
  if (g.maxConcurrent !== null && maxConcurrent === undefined) maxConcurrent = g.maxConcurrent;
  const ceiling = grantMaxHeld(g);
  if (maxConcurrent !== undefined && maxConcurrent > ceiling) {
    const why = g.maxConcurrent === null ? ` (the ceiling of a token created without --max-concurrent; an operator can grant more)` : '';
    throw new ForbiddenError(`token ${p.tokenId} allows at most ${ceiling} tasks at once${why}, not ${maxConcurrent}`, { maxConcurrent });
  }
  return { ...reg, budgetUsd, maxConcurrent };
}

/** The most tasks an agent token's agent may hold at once: its grant's, else AGENT_TOKEN_DEFAULTS.maxConcurrent. */
export function grantMaxHeld(g: Grant): number {
  return g.maxConcurrent ?? AGENT_TOKEN_DEFAULTS.maxConcurrent;
}

/** The principal a presented token stands for, or null for an unknown or revoked one. */
export async function tokenVerify(db: Db, token: string): Promise<Principal | null> {
  if (!token.startsWith(TOKEN_PREFIX) || token.length > 200) return null;
  const row = await apiTokenFind(db, tokenHash(token));
  return row ? { tokenId: row.id, role: row.role as TokenRole, agentId: row.agentId, grant: grantOf(row), tenants: row.tenants } : null;
}

/** Every token (never its secret), with its grant. */
export async function tokenList(db: Db) {
  return (await apiTokenList(db)).map((t) => ({
    id: t.id, role: t.role, agentId: t.agentId, name: t.name, createdAt: t.createdAt, lastUsedAt: t.lastUsedAt, revokedAt: t.revokedAt, grant: grantOf(t),
    tenants: t.tenants,
  }));
}

/** When this process last stamped each token: the stamp is kept to the minute, so a busy agent's requests skip it. */
const touchedAt = new Map<string, number>();
const TOUCH_EVERY_MS = 60_000;

/**
 * Record that a request with this token succeeded (refused requests change nothing). The column is
 * stamped at most once a minute (the statement checks too, across processes); within this process
 * the statement itself is skipped, so it costs an agent's claims and reports no round trip.
 */
export async function tokenTouch(db: Db, id: string): Promise<void> {
  const now = Date.now();
  if (now - (touchedAt.get(id) ?? 0) < TOUCH_EVERY_MS) return;
  if (touchedAt.size > 10_000) touchedAt.clear();
  touchedAt.set(id, now);
  await apiTokenTouch(db, id);
}

/** Whether a token that checked out earlier is still live: long-lived requests (the event stream) ask again. */
export const tokenLive = apiTokenLive;

export async function tokenRevoke(db: Db, id: string): Promise<void> {
  if (!(await apiTokenRevoke(db, id))) throw new NotFoundError('live token', id);
}

/** For `dagent tokens create --agent`: warn (not refuse) when the agent is not registered yet. */
export async function tokenAgentKnown(db: Db, agentId: string): Promise<boolean> {
  return (await agentGet(db, agentId)) !== undefined;
}
