import { sql, type SQL } from 'drizzle-orm';
import { rateWindowUsageSql } from '../rate-limits.js';
import { inOrder } from './shape.js';

/**
 * Admission, in the full statement only (keyed): concurrency keys and declared rate limits. A candidate whose key is
 * at its limit, or whose limits have no room left in their window, is passed over.
 */

/** CTE `rate_room`: the declared rate limits (rate_limits: a few rows) and what their windows hold now, as of this snapshot. */
export function rateRoomCte(): SQL {
  return sql`
    -- Declared rate limits (rate_limits: a few rows) and what their windows hold now (as of this snapshot).
    rate_room as materialized (
      select l.key, l.default_tokens, l.requests - u.n as requests_left, l.tokens - u.tok as tokens_left, u.tok as tokens_used
      from rate_limits l cross join lateral ${rateWindowUsageSql('l')} u
    )`;
}

/**
 * CTE `busy_keys`: concurrency keys at their limit (as of this snapshot): their tasks are passed over in the walk,
 * like an unaffordable DAG's. Read from the keys in use only (concurrency_keys_in_use_idx).
 */
export function busyKeysCte(): SQL {
  return sql`
    busy_keys as materialized (
      select k.key from concurrency_keys k
      where k.held > 0 and k.held - (select count(*) from concurrency_releases r where r.key = k.key) >= k.lim
    )`;
}

/**
 * CTEs `keys_locked`, `rate_locked`, `rate_applies`, `rate_refused` and `admitted`: the keyed candidates' keys locked
 * (SKIP LOCKED: a key another claim holds waits for the next claim), with what they hold now: held less the releases
 * not folded in yet; a key whose row was written after this statement's snapshot (a claim that committed meanwhile)
 * is passed over too, its held and the releases this snapshot sees would not match. Declared rate limits: each
 * candidate that names models runs on rate_model (the model the agent would be handed: rateModelSql); the limits on
 * it and on its provider apply. Their rows are locked (SKIP LOCKED) unless a claim that committed after this
 * snapshot wrote them (its reservations are not counted here). Within each key and each limit, candidates in claim
 * order are admitted while the room lasts; one refused by any of its limits is not claimed. The first request into
 * an empty window always fits, so a task estimated above a whole tokens limit still runs, alone.
 */
export function admissionCtes(): SQL {
  return sql`
    keys_locked as materialized (
      select k.key, k.lim - k.held + (select count(*)::int from concurrency_releases r where r.key = k.key) as room
      from concurrency_keys k
      where k.key in (select conc_key from picked where conc_key is not null)
        and (k.writer is null or k.writer = pg_current_xact_id_if_assigned() or pg_visible_in_snapshot(k.writer, pg_current_snapshot()))
      for update skip locked
    ),
    rate_locked as materialized (
      select l.key from rate_limits l
      where l.key in (select r.key from rate_room r join picked p on r.key = p.rate_model or r.key = split_part(p.rate_model, '/', 1))
        and (l.writer is null or l.writer = pg_current_xact_id_if_assigned() or pg_visible_in_snapshot(l.writer, pg_current_snapshot()))
      for update skip locked
    ),
    rate_applies as (
      select p.id, r.key, coalesce(p.estimated_tokens, r.default_tokens)::bigint as est, r.requests_left, r.tokens_left, r.tokens_used,
        p.effective_priority, p.ready_at
      from picked p join rate_room r on r.key = p.rate_model or r.key = split_part(p.rate_model, '/', 1)
    ),
    rate_refused as (
      select x.id from (
        select a.*, row_number() over w as n, sum(a.est) over w as tok from rate_applies a
        window w as (partition by a.key order by ${inOrder('a')})
      ) x
      where x.key not in (select key from rate_locked)
        or x.n > x.requests_left
        or (x.tok > x.tokens_left and not (x.n = 1 and x.tokens_used = 0))
    ),
    admitted as (
      select r.* from (
        select p.*, row_number() over (partition by p.conc_key order by ${inOrder('p')}) as key_rank from picked p
      ) r left join keys_locked k on k.key = r.conc_key
      where (r.conc_key is null or r.key_rank <= k.room)
        and r.id not in (select id from rate_refused)
    )`;
}

/** CTEs `keys_released` and `keys_taken`: each locked key's releases folded in (deleted), and what this claim took added. */
export function keysTakenCtes(): SQL {
  return sql`
    keys_released as (
      delete from concurrency_releases r where r.key in (select key from keys_locked) returning r.key
    ),
    keys_taken as (
      update concurrency_keys k set
        held = k.held - coalesce((select count(*) from keys_released x where x.key = k.key), 0)
                      + coalesce((select count(*) from claimable c where c.conc_key = k.key), 0),
        writer = pg_current_xact_id()
      where k.key in (select key from keys_locked)
    )`;
}

/**
 * CTEs `rate_reserved` and `rate_stamped`: what the claimed attempts reserve under their limits, and the limits'
 * stamp (writer): a claim whose snapshot predates this one's commit passes these keys over rather than count
 * without these rows.
 */
export function rateReservedCtes(): SQL {
  return sql`
    rate_reserved as (
      insert into rate_usage (key, task_id, fence, at, tokens_reserved)
      select a.key, c.id, c.fence, clock_timestamp(), least(a.est, 2147483647) from claimed c join rate_applies a on a.id = c.id
      returning key
    ),
    rate_stamped as (
      update rate_limits l set writer = pg_current_xact_id() where l.key in (select key from rate_locked)
        and exists (select 1 from claimed)
    )`;
}
