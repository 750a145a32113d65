import { sql } from 'drizzle-orm';
import { check, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

/**
 * A bearer token for the HTTP API. Only its SHA-256 is stored: tokens are 32 random
 * bytes, so a fast hash is enough and the lookup is one index probe.
 * An agent token acts as exactly one agent (`agent_id`).
 */
export const apiTokens = pgTable(
  'api_tokens',
  {
    id: text('id').primaryKey(),
    /** admin | agent */
    role: text('role').notNull(),
    agentId: text('agent_id'),
    name: text('name'),
    tokenHash: text('token_hash').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
  },
  (t) => [
    uniqueIndex('api_tokens_hash_uq').on(t.tokenHash),
    check('api_tokens_role_ck', sql`${t.role} in ('admin', 'agent') and (${t.role} = 'admin' or ${t.agentId} is not null)`),
  ],
);
