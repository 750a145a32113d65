import { and, asc, eq, isNull, sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { apiTokens } from '../schema/index.js';
import { REVOKED_CHANNEL, rowsOf, textArray } from '../statement.js';

export type ApiTokenRow = typeof apiTokens.$inferSelect;

export async function apiTokenInsert(db: Db, row: typeof apiTokens.$inferInsert): Promise<ApiTokenRow> {
  const [r] = await db.insert(apiTokens).values(row).returning();
  return r!;
}

/** The live token with this hash. */
export async function apiTokenFind(db: Db, tokenHash: string): Promise<ApiTokenRow | undefined> {
  const [row] = await db.select().from(apiTokens).where(and(eq(apiTokens.tokenHash, tokenHash), isNull(apiTokens.revokedAt)));
  return row;
}

/** Stamp a token's last use, at most once a minute (to spare the row). */
export async function apiTokenTouch(db: Db, id: string): Promise<void> {
  await db.update(apiTokens).set({ lastUsedAt: sql`now()` })
    .where(and(eq(apiTokens.id, id), sql`(${apiTokens.lastUsedAt} is null or ${apiTokens.lastUsedAt} < now() - interval '1 minute')`));
}

export function apiTokenList(db: Db) {
  return db.select({
    id: apiTokens.id, role: apiTokens.role, agentId: apiTokens.agentId, name: apiTokens.name,
    grantCapabilities: apiTokens.grantCapabilities, grantValidators: apiTokens.grantValidators, grantModels: apiTokens.grantModels,
    grantBudgetUsd: apiTokens.grantBudgetUsd, grantMaxConcurrent: apiTokens.grantMaxConcurrent, tenants: apiTokens.tenants,
    createdAt: apiTokens.createdAt, lastUsedAt: apiTokens.lastUsedAt, revokedAt: apiTokens.revokedAt,
  }).from(apiTokens).orderBy(asc(apiTokens.createdAt));
}

/** Whether the token is still live (not revoked). */
export async function apiTokenLive(db: Db, id: string): Promise<boolean> {
  const [row] = await db.select({ id: apiTokens.id }).from(apiTokens).where(and(eq(apiTokens.id, id), isNull(apiTokens.revokedAt)));
  return row !== undefined;
}

/**
 * Revoke a live token, and say so on REVOKED_CHANNEL in the same statement: the NOTIFY is delivered when the
 * revocation commits, so every node ends the token's sessions and streams then, not at its next poll.
 */
export async function apiTokenRevoke(db: Db, id: string): Promise<boolean> {
  const rows = await rowsOf<{ id: string }>(db, sql`
    with revoked as (
      update ${apiTokens} set revoked_at = now() where id = ${id} and revoked_at is null returning id
    )
    select id, pg_notify(${REVOKED_CHANNEL}, id) from revoked`);
  return rows.length > 0;
}

/** Which of these tokens are revoked (the fallback while a node hears no notifications). */
export async function apiTokensRevokedAmong(db: Db, ids: readonly string[]): Promise<string[]> {
  const rows = await rowsOf<{ id: string }>(db, sql`select id from ${apiTokens} where id = any(${textArray(ids)}) and revoked_at is not null`);
  return rows.map((r) => r.id);
}
