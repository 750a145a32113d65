import { sql } from 'drizzle-orm';
import { check, integer, numeric, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

/**
 * A bearer token for the HTTP API. Only its SHA-256 is stored: tokens are 32 random
 * bytes, so a fast hash is enough and the lookup is one index probe.
 * Its role says what it may call (admin, submit, read, signal, agent; auth/tokens.ts).
 * An agent token acts as exactly one agent (`agent_id`), within its grant: the
 * capabilities it may register (null: any but validator ones, for tokens made before
 * grants existed), the validator capabilities, and ceilings on budget and concurrency.
 */
export const apiTokens = pgTable(
  'api_tokens',
  {
    id: text('id').primaryKey(),
    /** admin | submit | read | signal | agent */
    role: text('role').notNull(),
    agentId: text('agent_id'),
    grantCapabilities: text('grant_capabilities').array(),
    grantValidators: text('grant_validators').array().notNull().default(sql`'{}'::text[]`),
    /** Models it may register (`*`: any); null for a token made before models were granted: any. */
    grantModels: text('grant_models').array(),
    grantBudgetUsd: numeric('grant_budget_usd', { mode: 'number' }),
    grantMaxConcurrent: integer('grant_max_concurrent'),
    /**
     * The tenants it reads and acts on (an agent token: the tenants its agent may serve); null: every tenant.
     * Another tenant's objects do not exist for it (a 404). Checked at creation against `tenants`.
     */
    tenants: text('tenants').array(),
    name: text('name'),
    tokenHash: text('token_hash').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
  },
  (t) => [
    uniqueIndex('api_tokens_hash_uq').on(t.tokenHash),
    check('api_tokens_role_ck', sql`${t.role} in ('admin', 'submit', 'read', 'signal', 'agent') and ((${t.role} = 'agent') = (${t.agentId} is not null))`),
  ],
);
