import { sql } from 'drizzle-orm';
import { index, integer, pgTable, text } from 'drizzle-orm/pg-core';
import { xid8 } from './column-types.js';

/**
 * A concurrency key (`repo:acme/api`) and how many of its tasks may be claimed or running at once,
 * across DAGs. `held` counts what claims took, less the releases they have folded in: a claim
 * locks the rows of the keys it would take (SKIP LOCKED), reads `held` less the releases not yet
 * folded (concurrency_releases), and writes the new count in the same statement.
 */
export const concurrencyKeys = pgTable('concurrency_keys', {
  key: text('key').primaryKey(),
  /** The smallest limit a task with this key declared (tasks-intake.ts): a DAG can lower it, never raise it. */
  lim: integer('lim').notNull(),
  held: integer('held').notNull().default(0),
  /** The transaction of the claim that last wrote `held` (pg_current_xact_id()): a claim whose snapshot predates it passes the key over. */
  writer: xid8('writer'),
}, (k) => [
  // A claim reads only the keys in use: the table keeps every key ever declared.
  index('concurrency_keys_in_use_idx').on(k.key).where(sql`${k.held} > 0`),
]);

/**
 * One row per keyed task that stopped being claimed or running (completed, failed, released,
 * cancelled, reaped, waiting, validating), written by a trigger on tasks (migration 0021): an
 * insert, so the transaction ending a task never waits on the key's row a claim may hold. The next
 * claim that locks the key folds them into `held` and deletes them.
 */
export const concurrencyReleases = pgTable('concurrency_releases', {
  key: text('key').notNull(),
}, (r) => [index('concurrency_releases_key_idx').on(r.key)]);
