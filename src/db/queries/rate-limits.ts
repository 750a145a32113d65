import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { dateOf, rowsOf } from '../statement.js';

export interface RateLimitInput {
  key: string;
  requests: number | null;
  tokens: number | null;
  windowSec: number;
  defaultTokens: number;
}

export interface RateLimitRow extends RateLimitInput {
  /** Attempts admitted in the current window, and the tokens they reserved or used. */
  requestsUsed: number;
  tokensUsed: number;
  updatedAt: Date;
}

/** Declare or change a limit; what the window already holds still counts. */
export async function rateLimitUpsert(db: Db, l: RateLimitInput): Promise<void> {
  await db.execute(sql`
    insert into rate_limits (key, requests, tokens, window_sec, default_tokens, writer)
    values (${l.key}, ${l.requests}, ${l.tokens}, ${l.windowSec}, ${l.defaultTokens}, pg_current_xact_id())
    on conflict (key) do update set requests = excluded.requests, tokens = excluded.tokens, window_sec = excluded.window_sec,
      default_tokens = excluded.default_tokens, updated_at = now(),
      -- Stamped like a claim's reservation: a claim whose snapshot predates the change passes the limit over once.
      writer = pg_current_xact_id()`);
}

/** Remove a limit; false when there was none. Its usage rows stay until they are an hour old (rateUsagePrune). */
export async function rateLimitDelete(db: Db, key: string): Promise<boolean> {
  const rows = await rowsOf<{ key: string }>(db, sql`delete from rate_limits where key = ${key} returning key`);
  return rows.length > 0;
}

/**
 * What the current window of the limit row `l` holds, as a LATERAL subquery with `n` (attempts) and `tok` (tokens
 * reserved, or used once reported): the one definition the claim and the listings share.
 */
export function rateWindowUsageSql(l: string): SQL {
  return sql.raw(`(
      select count(*)::int as n, coalesce(sum(coalesce(r.tokens_used, r.tokens_reserved)), 0)::bigint as tok
      from rate_usage r where r.key = ${l}.key and r.at > clock_timestamp() - make_interval(secs => ${l}.window_sec)
    )`);
}

/** Every declared limit with what its current window holds. */
export async function rateLimitList(db: Db): Promise<RateLimitRow[]> {
  const rows = await rowsOf<Omit<RateLimitRow, 'updatedAt'> & { updatedAt: string }>(db, sql`
    select l.key, l.requests, l.tokens, l.window_sec as "windowSec", l.default_tokens as "defaultTokens", l.updated_at as "updatedAt",
      u.n as "requestsUsed", u.tok::float8 as "tokensUsed"
    from rate_limits l cross join lateral ${rateWindowUsageSql('l')} u
    order by l.key`);
  return rows.map((r) => ({ ...r, updatedAt: dateOf(r.updatedAt)! }));
}

/** The keys of the declared limits (no window sums): for the checks that only count or name them. */
export async function rateLimitKeys(db: Db): Promise<string[]> {
  return (await rowsOf<{ key: string }>(db, sql`select key from rate_limits order by key`)).map((r) => r.key);
}

/**
 * Delete usage rows older than the longest window a limit may have (`keepSec`), whatever the limits say now: a
 * window made longer, or a limit removed and declared again, still counts what its window held. Bounded per call so
 * a large backlog is pruned in steps, never one long statement holding the claim's rows.
 */
export const RATE_USAGE_PRUNE_BATCH = 10_000;

export async function rateUsagePrune(db: Db, keepSec: number, batch = RATE_USAGE_PRUNE_BATCH): Promise<number> {
  const rows = await rowsOf<{ n: number }>(db, sql`
    with old as (
      select u.task_id, u.fence, u.key from rate_usage u
      where u.at < clock_timestamp() - make_interval(secs => ${keepSec}::int)
      limit ${batch}
    ), gone as (
      delete from rate_usage u using old o where u.task_id = o.task_id and u.fence = o.fence and u.key = o.key returning 1
    )
    select count(*)::int as n from gone`);
  return rows[0]?.n ?? 0;
}

/**
 * What a provider's 429 on `model` pauses: the model, unless only its provider (`openai` for `openai/gpt-4o`)
 * has a declared limit, whose 429 is then the provider's, for all its models.
 */
export async function rateLimitPauseKey(db: Db, model: string): Promise<string> {
  const provider = model.split('/')[0]!;
  if (provider === model) return model;
  const rows = await rowsOf<{ key: string }>(db, sql`select key from rate_limits where key in (${model}, ${provider})`);
  return rows.length === 1 && rows[0]!.key === provider ? provider : model;
}
