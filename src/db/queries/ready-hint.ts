import { sql, type SQL } from 'drizzle-orm';
import { READY_CHANNEL } from './run.js';

/**
 * The payload of a READY notification: how many tasks of one claim group became READY, and the
 * group (`<count> <cap_key>`), so a node's waiting HTTP claims wake only agents that can take them
 * (http/claim-waiters.ts). A payload without a group (an empty one, or one whose key would not fit
 * in a NOTIFY) means "something became READY": everyone wakes. Decided in docs/architecture.md#notify.
 */
export interface ReadyHint {
  count: number;
  /** Null: any group. */
  group: { capabilities: string[]; models: string[] } | null;
}

/** NOTIFY payloads are at most 8,000 bytes; a key longer than this is announced without its group. */
const KEY_BYTES_MAX = 7_000;

/**
 * One NOTIFY per claim group among `source`'s rows (a CTE with `status` and `cap_key`) that are
 * READY, as an expression that counts them; nothing when none is. PostgreSQL folds identical
 * payloads of one transaction into one, which only merges hints that wake the same waiters.
 */
export function readyNotifySql(source: SQL): SQL {
  return sql`(select count(*) from (
    select pg_notify(${READY_CHANNEL}, case when octet_length(g.cap_key) > ${KEY_BYTES_MAX} then g.n::text else g.n::text || ' ' || g.cap_key end)
    from (select cap_key, count(*) as n from ${source} where status = 'ready' group by cap_key) g) x)`;
}

/** The hint a payload carries; null for one that names nothing (wake everyone). */
export function readyHintParse(payload: string): ReadyHint | null {
  const m = /^(\d+)(?: (.*))?$/s.exec(payload);
  if (!m) return null;
  const count = Number(m[1]);
  if (m[2] === undefined) return { count, group: null };
  const [caps, models] = m[2].split(' models=');
  return { count, group: { capabilities: caps ? caps.split(',') : [], models: models ? models.split(',') : [] } };
}
