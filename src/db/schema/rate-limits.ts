import { sql } from 'drizzle-orm';
import { index, integer, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { xid8 } from './column-types.js';

/**
 * A rate limit declared ahead of time for a model (`openai/gpt-4o`) or a provider (`openai`: every
 * `openai/…` model), shared by the fleet: at most `requests` attempts claimed, and `tokens` tokens
 * reserved or used, in any `window_sec` window. The claim reserves against it (rate_usage) in the
 * statement that takes the task; an attempt's reported tokens correct its reservation.
 */
export const rateLimits = pgTable('rate_limits', {
  key: text('key').primaryKey(),
  requests: integer('requests'),
  tokens: integer('tokens'),
  windowSec: integer('window_sec').notNull().default(60),
  /** Tokens reserved for a task that declares no estimated_tokens. */
  defaultTokens: integer('default_tokens').notNull().default(0),
  /** The transaction of the claim that last reserved under it: a claim whose snapshot predates it passes the key over. */
  writer: xid8('writer'),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * One row per attempt a claim admitted under a limit (two when a model's and its provider's both apply):
 * the window's requests are its rows, its tokens what they reserved, or used once the attempt reported them.
 * Rows older than the longest window are pruned by the maintenance loop `rate-usage`.
 */
export const rateUsage = pgTable('rate_usage', {
  key: text('key').notNull(),
  taskId: text('task_id').notNull(),
  fence: integer('fence').notNull(),
  at: timestamp('at', { withTimezone: true }).notNull().default(sql`clock_timestamp()`),
  tokensReserved: integer('tokens_reserved').notNull(),
  /** What the attempt reported (tokens in + out), when it ended; until then the reservation counts. */
  tokensUsed: integer('tokens_used'),
}, (u) => [
  // By attempt first: the attempt's end corrects its rows by (task, fence).
  primaryKey({ name: 'rate_usage_pkey', columns: [u.taskId, u.fence, u.key] }),
  index('rate_usage_window_idx').on(u.key, u.at),
]);
