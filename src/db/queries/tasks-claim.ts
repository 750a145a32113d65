import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import type { ClaimedRow } from '../rows.js';
import { fromStates, HELD_STATES } from '../../model/state-machine.js';
import { attemptsPreviousFor, type PreviousAttempt } from './attempts.js';
import { dateOf, queryCompile, queryFill, rowsOfPreparedGeneric, sqlStateList, textArray, type CompiledQuery } from '../statement.js';
import { leaseSql } from './tasks-lifecycle.js';
import { spendRemainingSql, spendReserveAgentSet, spendReserveDagCte } from './spend.js';
import { rateWindowUsageSql } from './rate-limits.js';

export type { ClaimedRow } from '../rows.js';

export { PREVIOUS_ATTEMPTS_MAX, type PreviousAttempt } from './attempts.js';

/**
 * Claim up to `limit` READY tasks for one agent, in one statement.
 *
 * Claim groups: every task belongs to the group of its required capability set and
 * the models it accepts (`cap_key`), and tasks_ready_group_idx is ordered (cap_key,
 * effective_priority, ready_at, id). The claim reads the groups the agent covers
 * (its capabilities hold the group's; it has one of the group's models, or the group
 * names none) from the small capability_groups table, walks each group's index range in priority order
 * (a LATERAL subquery, FOR UPDATE SKIP LOCKED, at most `limit` rows), and merges
 * the heads. Tasks the agent cannot take are never visited, however many there
 * are and however urgent: a claim costs O(groups covered × limit), not O(READY).
 * The candidates are a CTE joined by the UPDATE, never `WHERE id IN (SELECT …
 * LIMIT n FOR UPDATE SKIP LOCKED)`: Postgres may re-run such a subquery and claim
 * more than `limit` rows.
 *
 * Concurrency: the agent holds at most max_concurrent tasks (claimed, running or
 * validating; a token's grant may lower it), counted under the agent row's lock. A
 * statement's snapshot is taken before it waits for that lock, so a claim of the same
 * agent that committed during the wait would be missed from the count: every claim that
 * takes tasks stamps the agent row (claim_writer), and a claim that finds a stamp its
 * snapshot does not see takes nothing and says so (`stale`); taskClaimReady then claims
 * again with the lock taken in a statement of its own first. Exact, and the common case
 * (no claim of the same agent in between) stays one statement.
 *
 * Budgets never over-commit. Each claimed task reserves its max_cost_usd against
 * the agent's budget and its DAG's ceiling (spent + reserved ≤ budget); the
 * attempt's end settles the real cost and releases the reservation.
 * - The agent: its row is locked first (FOR UPDATE, and re-read if it changed), so its
 *   remaining budget is exact for this statement; candidates are kept while their
 *   running sum of max costs fits.
 * - The DAG: the reservation is an UPDATE of the dags row guarded by
 *   spent + reserved + amount ≤ budget, which Postgres re-checks on the latest row
 *   version when claimers race; a DAG whose reservation fails contributes no task
 *   to this claim (its tasks stay READY for the next one).
 * Tasks without max_cost_usd reserve nothing and need only some budget left.
 * Each claim bumps the fencing token and starts the claim lease.
 */
/** When this process last saw READY tasks with a concurrency key, and how long it claims with the keys' steps after. */
let keyedSeenAt = 0;
const KEYED_MODE_MS = 10_000;

export async function taskClaimReady(
  db: Db, agentId: string, capabilities: readonly string[], limit: number, claimTtlSec: number, opts: ClaimSqlOptions = {},
): Promise<{ rows: ClaimedRow[]; previousAttempts: Map<string, PreviousAttempt[]>; agentActive: boolean }> {
  type Row = Omit<ClaimedRow, 'leaseExpiresAt'> & { leaseExpiresAt: string | Date; stale: boolean | null; keyedReady: boolean };
  const once = async (keyed: boolean, n: number): Promise<Row[]> => {
    const statement = queryFill(claimCompiled({ ...opts, keyed }), {
      agentId, caps: [...capabilities], limit: n, claimTtlSec, budgetUsd: opts.grant?.budgetUsd ?? null, maxHeld: opts.grant?.maxHeld ?? null, dagId: opts.dagId ?? null,
    });
    const got = await rowsOfPreparedGeneric<Row>(db, statement);
    // Another claim of this agent committed while this one waited for its row: claim again, counting after the lock.
    if (!got.some((r) => r.stale)) return got;
    return rowsOfPreparedGeneric<Row>(db, statement, { lockFirst: sql`select 1 from agents where id = ${agentId} for update` });
  };
  // Without READY tasks that carry a concurrency key (the usual case), the claim leaves the keys' steps out: a
  // shorter statement plans faster (custom plans; claim of 1 at 20,000 READY, p50 ~0.3 ms less). It skips keyed
  // tasks, and says whether any are READY; then the full statement claims the rest. Once keyed tasks were seen,
  // the process starts with the full statement for a while: the short one would walk past every keyed task.
  let rows: Row[];
  if (Date.now() - keyedSeenAt < KEYED_MODE_MS) {
    rows = await once(true, limit);
  } else {
    rows = await once(false, limit);
    const taken = rows.filter((r) => r.id !== null).length;
    if (rows[0]?.keyedReady) {
      keyedSeenAt = Date.now();
      if (taken < limit) rows = [...rows, ...(await once(true, limit - taken))];
    }
  }
  // `stale` is null only when the statement found no active agent row (its agent CTE is empty).
  const agentActive = rows.some((r) => r.stale !== null);
  rows = rows.filter((r) => r.id !== null);
  // The rows as the driver built them, the lease's time set in place: a copy with a field added (a spread) left
  // objects V8 reads slowly, and the claimed task reads ~20 fields of each. Claim of 200, Node CPU per task:
  // 11.5-13.4 us with the copy, docs/benchmarks.md "Where a task's time goes".
  for (const r of rows) r.leaseExpiresAt = dateOf(r.leaseExpiresAt)!;
  // A retry's history, in a statement of its own: in the claim it cost every claim planning time (custom plans).
  return { rows: rows as ClaimedRow[], previousAttempts: await attemptsPreviousFor(db, rows), agentActive };
}

export interface ClaimSqlOptions {
  /** Only tasks of this DAG. */
  dagId?: string;
  /**
   * Claim straight into RUNNING, under the heartbeat lease (three of the task's heartbeat_sec): for a claimer that
   * starts everything it claims at once, which saves the start statement. Default false: CLAIMED, under the claim TTL.
   */
  start?: boolean;
  /**
   * Ceilings from the caller's token grant, over what the agent row says (a registration made before
   * the grant, an operator's): the agent holds at most `maxHeld` tasks at once, and spends at most `budgetUsd`.
   */
  grant?: { maxHeld: number | null; budgetUsd: number | null };
  /** The statement with the concurrency keys' steps (taskClaimReady chooses). Default false: keyed tasks are skipped. */
  keyed?: boolean;
}

/**
 * The model a candidate would run on, in SQL (the full statement): the first of the attempt's models the agent has
 * that is not paused, itself or its provider, in the order modelsForAgent (engine/attempt/claim.ts) hands them out. Null
 * for a task that names no model (declared limits do not apply to it).
 */
function rateModelSql(t: string): SQL {
  const models = sql.raw(`coalesce(${t}.spec->'models', '[]')`);
  const fallbacks = sql.raw(`coalesce(${t}.spec->'fallbackModels', '[]')`);
  return sql`(select x.m from agent a, jsonb_array_elements_text(
      case when ${sql.raw(t)}.attempts + 1 >= 3 and jsonb_array_length(${fallbacks}) > 0 then ${fallbacks} || ${models} else ${models} || ${fallbacks} end
    ) with ordinality x(m, i)
    where (x.m = any(a.models) or '*' = any(a.models)) and x.m <> all(a.paused) and split_part(x.m, '/', 1) <> all(a.paused)
    order by x.i limit 1)`;
}

/** The claim statement itself, with its values, exposed so it can be EXPLAINed as it runs. */
export function taskClaimReadySql(agentId: string, capabilities: readonly string[], limit: number, claimTtlSec: number, opts: ClaimSqlOptions = {}): SQL {
  return claimSqlOf({
    agentId: sql`${agentId}`, caps: textArray(capabilities), limit: sql`${limit}`, claimTtlSec: sql`${claimTtlSec}`,
    budgetUsd: sql`${opts.grant?.budgetUsd ?? null}`, maxHeld: sql`${opts.grant?.maxHeld ?? null}`, dagId: sql`${opts.dagId ?? null}`,
  }, opts);
}

/** What varies between claims of one shape: values, or placeholders in the compiled statement. */
interface ClaimParts { agentId: SQL; caps: SQL; limit: SQL; claimTtlSec: SQL; budgetUsd: SQL; maxHeld: SQL; dagId: SQL }

/** The claim's shapes (which steps and clauses its text has), compiled once each: claims fill in their values. */
const claimShapes = new Map<string, CompiledQuery>();

/** The claim statement of `opts`'s shape, compiled once (taskClaimReady fills in its values with queryFill). */
export function claimCompiled(opts: ClaimSqlOptions): CompiledQuery {
  // Each part as the text tests it (claimSqlOf): a truthy `start` that is not `true` must not share `false`'s text.
  const shape = `${opts.keyed === true}:${Boolean(opts.start)}:${opts.grant?.budgetUsd != null}:${opts.grant?.maxHeld != null}:${Boolean(opts.dagId)}`;
  let c = claimShapes.get(shape);
  if (!c) {
    const p = (name: string) => sql`${sql.placeholder(name)}`;
    c = queryCompile(claimSqlOf({
      agentId: p('agentId'), caps: sql`${sql.placeholder('caps')}::text[]`, limit: p('limit'), claimTtlSec: p('claimTtlSec'),
      budgetUsd: p('budgetUsd'), maxHeld: p('maxHeld'), dagId: p('dagId'),
    }, opts));
    claimShapes.set(shape, c);
  }
  return c;
}

function claimSqlOf(v: ClaimParts, opts: ClaimSqlOptions): SQL {
  const agentId = v.agentId;
  const caps = v.caps;
  const limit = v.limit;
  const inOrder = (a: string) => sql.raw(`${a}.effective_priority, ${a}.ready_at, ${a}.id`);
  const g = opts.grant;
  const keyed = opts.keyed === true;
  const candidates = keyed ? sql`admitted` : sql`picked`;
  const budget = g?.budgetUsd != null ? sql`least(budget_usd, ${v.budgetUsd}::numeric)` : sql`budget_usd`;
  const maxHeld = g?.maxHeld != null ? sql`least(max_concurrent, ${v.maxHeld}::int)` : sql`max_concurrent`;
  // Declared rate limits (full statement only). Each candidate that names models runs on rate_model (the model
  // the agent would be handed: rateModelSql); the limits on it and on its provider apply. Their rows are locked
  // (SKIP LOCKED: a limit another claim holds waits for the next claim) unless a claim that committed after this
  // snapshot wrote them (its reservations are not counted here). Within each limit, candidates in claim order are
  // admitted while the window's requests and tokens last; one refused by any of its limits is not claimed. The
  // first request into an empty window always fits, so a task estimated above a whole tokens limit still runs, alone.
  const rateAdmissionCtes = sql`
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
    ),`;
  return sql`
    -- Times are clock_timestamp(): a claim took its tasks after the agent lock's wait, not when its transaction
    -- or its message began (now(), statement_timestamp()).
    with ${keyed ? sql`
    -- Declared rate limits (rate_limits: a few rows) and what their windows hold now (as of this snapshot).
    rate_room as materialized (
      select l.key, l.default_tokens, l.requests - u.n as requests_left, l.tokens - u.tok as tokens_left, u.tok as tokens_used
      from rate_limits l cross join lateral ${rateWindowUsageSql('l')} u
    ),` : sql``}
    agent as materialized (
      select capabilities, models,
        -- A claim of this agent that took tasks committed after this statement's snapshot: the count below missed
        -- them. (The row FOR UPDATE returns is the latest version, read again after the wait; a plain read would not be.)
        claim_writer is not null and claim_writer is distinct from pg_current_xact_id_if_assigned()
          and not pg_visible_in_snapshot(claim_writer, pg_current_snapshot()) as stale,
        case when ${budget} is null then null else ${spendRemainingSql('agents', budget)} end as remaining,
        ${maxHeld} - (select count(*)::int from tasks h where h.claimed_by = ${agentId} and h.status in (${sqlStateList(HELD_STATES)})) as slots,
        -- Models (or providers) paused for the fleet after a provider's rate limit (model_pauses: a few rows, usually
        -- none), and in the full statement the declared limits with nothing left in their window.
        (select coalesce(array_agg(p.model), '{}') from model_pauses p where p.until > clock_timestamp())
          ${keyed ? sql`|| array(select r.key from rate_room r where r.requests_left <= 0 or r.tokens_left <= 0)` : sql``} as paused,
        -- Any declared rate limit: the short statement then leaves tasks that name models to the full one.
        exists (select 1 from rate_limits) as limited
      from agents where id = ${agentId} and status = 'active'
      for update
    ),
    broke as materialized (
      select id from dags where budget_usd is not null and status in ('running', 'blocked') and ${spendRemainingSql('dags')} <= 0
    ),
    ${keyed ? sql`
    -- Concurrency keys at their limit (as of this snapshot): their tasks are passed over in the walk, like an
    -- unaffordable DAG's. Read from the keys in use only (concurrency_keys_in_use_idx).
    busy_keys as materialized (
      select k.key from concurrency_keys k
      where k.held > 0 and k.held - (select count(*) from concurrency_releases r where r.key = k.key) >= k.lim
    ),` : sql``}
    groups as materialized (
      select g.cap_key from capability_groups g
      where g.capabilities <@ ${caps} and ${caps} <@ (select capabilities from agent)
        -- A group that names models: the agent has one of them that is not paused (itself or its provider).
        and (cardinality(g.models) = 0 or (select case when cardinality(a.paused) = 0 then a.models && g.models or '*' = any(a.models)
          else exists (select 1 from unnest(g.models) m where (m = any(a.models) or '*' = any(a.models))
            and m <> all(a.paused) and split_part(m, '/', 1) <> all(a.paused)) end from agent a))
        ${keyed ? sql`` : sql`and (cardinality(g.models) = 0 or not (select limited from agent))`}
        and coalesce((select remaining from agent), 1) > 0 and (select slots from agent) > 0
        and not (select stale from agent)
    ),
    picked as (
      select c.* from groups g cross join lateral (
        select t.id, t.dag_id, t.max_cost_usd, t.effective_priority, t.ready_at, t.conc_key
          ${keyed ? sql`, ${rateModelSql('t')} as rate_model, t.estimated_tokens` : sql``}
        from tasks t
        -- 'ready' is a literal, not a parameter: with it, a generic plan walks tasks_ready_group_idx (a partial index) and
        -- PostgreSQL keeps it after five executions, so the claim is planned once per connection, not on every call.
        -- As a parameter, the generic plan seq-scanned tasks and every claim was planned afresh (custom plans):
        -- claim of 1 at 2,000 READY, p50 1.66 ms as a parameter, 0.68 ms as a literal (pg_prepared_statements: 0 → 35 of 40 generic).
        where t.status = ${sqlStateList(fromStates('claim'))} and t.cap_key = g.cap_key
          and (t.max_cost_usd is null or t.max_cost_usd <= coalesce((select remaining from agent), t.max_cost_usd))
          -- No self-approval: the agent that produced an output never claims the validation task that judges it.
          and (t.validates_agent is null or t.validates_agent <> ${agentId})
          -- A task its DAG cannot afford is passed over here, inside the walk, so it never takes a place in the
          -- LIMIT that an affordable task behind it (of another DAG) should have (the same rule as unclaimable's dag_budget).
          -- DAGs with nothing left are read once per claim (broke, usually empty, from a partial index); only a
          -- task with a max cost looks its DAG up. npm run bench --quick, flat 32 slots: 13.3k tasks/s without
          -- the check, 12.0k with a DAG lookup per visited row, 14.4k like this (claim of 1: p50 1.9 / 2.7 / 1.4 ms).
          and t.dag_id <> all(select id from broke)
          ${keyed ? sql`and (t.conc_key is null or not (t.conc_key = any(select key from busy_keys)))` : sql`and t.conc_key is null`}
          and (t.max_cost_usd is null or not exists (
            select 1 from dags d where d.id = t.dag_id and ${spendRemainingSql('d')} < t.max_cost_usd))
          ${opts.dagId ? sql`and t.dag_id = ${v.dagId}` : sql``}
        order by ${inOrder('t')}
        limit ${limit}
        for update of t skip locked
      ) c
      order by ${inOrder('c')}
      limit least(${limit}::int, greatest(0, (select slots from agent)))
    ),
    -- The keys of keyed candidates, locked (SKIP LOCKED: a key another claim holds waits for the next claim),
    -- with what they hold now: held less the releases not folded in yet. A key whose row was written after this
    -- statement's snapshot (a claim that committed meanwhile) is passed over too: its held and the releases this
    -- snapshot sees would not match.
    ${keyed ? sql`keys_locked as materialized (
      select k.key, k.lim - k.held + (select count(*)::int from concurrency_releases r where r.key = k.key) as room
      from concurrency_keys k
      where k.key in (select conc_key from picked where conc_key is not null)
        and (k.writer is null or k.writer = pg_current_xact_id_if_assigned() or pg_visible_in_snapshot(k.writer, pg_current_snapshot()))
      for update skip locked
    ),
    ${rateAdmissionCtes}
    admitted as (
      select r.* from (
        select p.*, row_number() over (partition by p.conc_key order by ${inOrder('p')}) as key_rank from picked p
      ) r left join keys_locked k on k.key = r.conc_key
      where (r.conc_key is null or r.key_rank <= k.room)
        and r.id not in (select id from rate_refused)
    ),` : sql``}
    -- The budgets' running sums, only when a candidate has a max cost: without one, every candidate fits (the
    -- agent has budget left, or groups is empty), and the two sorts, the windows and a DAG lookup per candidate
    -- would cost a claim of 200 ~0.8 ms of its ~5 (EXPLAIN ANALYZE, 200 READY; docs/benchmarks.md "Where a task's time goes").
    -- Whether any candidate has a max cost, asked once for both branches below.
    costs as materialized (select exists (select 1 from ${candidates} q where q.max_cost_usd > 0) as found),
    costed as (
      select p.id, p.dag_id, p.max_cost_usd, p.conc_key, ${keyed ? sql`p.rate_model,` : sql``}
        sum(coalesce(p.max_cost_usd, 0)) over (order by ${inOrder('p')}) as agent_sum,
        sum(coalesce(p.max_cost_usd, 0)) over (partition by p.dag_id order by ${inOrder('p')}) as dag_sum,
        case when p.max_cost_usd > 0 then (select ${spendRemainingSql('d')} from dags d where d.id = p.dag_id) end as dag_remaining
      from ${candidates} p
      where (select found from costs)
    ),
    fitting as (
      select p.id, p.dag_id, p.max_cost_usd, p.conc_key ${keyed ? sql`, p.rate_model` : sql``} from ${candidates} p
      where not (select found from costs)
      union all
      select id, dag_id, max_cost_usd, conc_key ${keyed ? sql`, rate_model` : sql``} from costed
      where ((select remaining from agent) is null or agent_sum <= (select remaining from agent))
        and (coalesce(max_cost_usd, 0) = 0 or dag_remaining is null or dag_sum <= dag_remaining)
    ),
    ${spendReserveDagCte(sql`select dag_id, sum(max_cost_usd) as amount from fitting where max_cost_usd > 0 group by dag_id`)},
    claimable as (
      select f.id, f.conc_key, coalesce(f.max_cost_usd, 0) as reserve ${keyed ? sql`, f.rate_model` : sql``} from fitting f
      where coalesce(f.max_cost_usd, 0) = 0 or f.dag_id in (select id from dag_reserved)
    ),
    ${keyed ? sql`
    -- Each locked key: the releases it counted are folded in (deleted), and what this claim took is added.
    keys_released as (
      delete from concurrency_releases r where r.key in (select key from keys_locked) returning r.key
    ),
    keys_taken as (
      update concurrency_keys k set
        held = k.held - coalesce((select count(*) from keys_released x where x.key = k.key), 0)
                      + coalesce((select count(*) from claimable c where c.conc_key = k.key), 0),
        writer = pg_current_xact_id()
      where k.key in (select key from keys_locked)
    ),` : sql``}
    -- The agent's reservation, and its stamp (claim_writer) when this claim took anything.
    agent_claimed as (
      update agents a set ${spendReserveAgentSet(sql`s.amount`)}, claim_writer = pg_current_xact_id()
      from (select coalesce(sum(reserve), 0) as amount, count(*) as n from claimable) s
      where a.id = ${agentId} and s.n > 0
    ),
    claimed as (
    update tasks t set
      status = ${opts.start ? 'running' : 'claimed'},
      claimed_by = ${agentId},
      claimed_at = clock_timestamp(),
      started_at = ${opts.start ? sql`clock_timestamp()` : sql`null`},
      heartbeat_at = ${opts.start ? sql`clock_timestamp()` : sql`null`},
      progress = null,
      progress_message = null,
      fence = t.fence + 1,
      attempts = t.attempts + 1,
      reserved_usd = c.reserve,
      lease_expires_at = clock_timestamp() + ${opts.start ? leaseSql(undefined) : sql`make_interval(secs => ${v.claimTtlSec})`},
      updated_at = clock_timestamp()
    from claimable c
    where t.id = c.id
    returning
      t.id, t.dag_id as "dagId", t.key, t.type, t.title, t.spec, t.fence, t.attempts as "attempt",
      t.max_attempts as "maxAttempts", t.max_duration_sec as "maxDurationSec", t.heartbeat_sec as "heartbeatSec", t.max_cost_usd::float8 as "maxCostUsd",
      t.output_spec as "outputSpec", t.lease_expires_at as "leaseExpiresAt", t.origin,
      extract(epoch from clock_timestamp() - coalesce(t.ready_at, t.created_at))::float8 as "waitSec",
      case when cardinality(t.context_keys) = 0 then '{}'::jsonb else (
        select coalesce(jsonb_object_agg(u.key, u.output), '{}'::jsonb)
        from tasks u where u.dag_id = t.dag_id and u.key = any(t.context_keys)
      ) end as "upstreamOutputs",
      -- Behind a flag: an unconditional lookup per claimed row cost ~7 % of flat throughput.
      case when not t.has_children then '{}'::jsonb else (
        select coalesce(jsonb_object_agg(substr(c.key, length(t.key) + 2), c.output), '{}'::jsonb)
        from tasks c where c.parent_id = t.id and c.status = 'completed'
      ) end as "childOutputs",
      (select models from agent) as "agentModels", (select paused from agent) as "pausedModels"
      ${keyed ? sql`, (select c.rate_model from claimable c where c.id = t.id) as "rateModel"` : sql``}
    )${keyed ? sql`,
    -- What the claimed attempts reserve under their limits, and the limits' stamp (writer): a claim whose
    -- snapshot predates this one's commit passes these keys over rather than count without these rows.
    rate_reserved as (
      insert into rate_usage (key, task_id, fence, at, tokens_reserved)
      select a.key, c.id, c.fence, clock_timestamp(), least(a.est, 2147483647) from claimed c join rate_applies a on a.id = c.id
      returning key
    ),
    rate_stamped as (
      update rate_limits l set writer = pg_current_xact_id() where l.key in (select key from rate_locked)
        and exists (select 1 from claimed)
    )` : sql``}
    -- One row when nothing was claimed (its id null), so \`stale\` reaches the caller either way.
    select c.*, (select stale from agent) as stale,
      ${keyed ? sql`false` : sql`(select limited from agent) or exists (select 1 from tasks k where k.status = 'ready' and k.conc_key is not null)`} as "keyedReady"
    from (select 1) one left join claimed c on true`;
}
