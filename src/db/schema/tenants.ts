import { sql } from 'drizzle-orm';
import { TENANT_DEFAULTS } from '../../config/index.js';
import { xid8 } from './column-types.js';
import { bigint, bigserial, boolean, check, doublePrecision, index, integer, numeric, pgTable, real, text, timestamp } from 'drizzle-orm/pg-core';

/** The tenant every DAG, schedule and agent belongs to when none is named: a setup without tenants is this one. */
export const DEFAULT_TENANT = 'default';

/**
 * Added to the vtime of a tenant not hinted to have READY work (ready_hint false): more than any tenant's vtime (tokens
 * ÷ weight) reaches, so the claim walks those tenants after every hinted one.
 */
const UNHINTED_AFTER = '1000000000000000000';

/** A tenant's place in the fair-share claim's walk (tenants_claim_order_idx), of the `tenants` row aliased `a` (none: unqualified). */
export function tenantOrderKey(a?: string): string {
  const c = (column: string) => (a ? `${a}.${column}` : column);
  return `(${c('vtime')} + case when ${c('ready_hint')} then 0 else ${UNHINTED_AFTER} end)`;
}

/**
 * A tenant: a team, or a customer of a product built on dagent. Its DAGs (and their tasks) and schedules belong to
 * it. Among tenants with work ready for an agent, the claim serves them in proportion to their weights, measured in
 * the estimated tokens of the tasks claimed (docs/priority.md, "Tenants and fair share").
 *
 * `vtime` is its virtual time: tokens served / weight, folded in from tenant_served by the share loop
 * (maintenance/tenant-share.ts); the claim serves the tenant of lowest vtime first. A tenant with nothing READY is
 * brought up to the lowest vtime of those that have work, so idle time earns no credit to spend later in a burst.
 */
export const tenants = pgTable('tenants', {
  id: text('id').primaryKey(),
  name: text('name'),
  weight: real('weight').notNull().default(1),
  vtime: doublePrecision('vtime').notNull().default(0),
  /**
   * Whether it had READY work at the share loop's last pass (set true again by a submit into it): the fair-share claim
   * walks these tenants first. An idle tenant's vtime is the lowest of those with work, so in vtime order alone each
   * claim would first probe every idle tenant (docs/benchmarks.md "Idle tenants": claim of 1 p50 102 ms with 900 idle).
   */
  readyHint: boolean('ready_hint').notNull().default(true),
  /** Estimated tokens of the tasks claimed for it, in all (what fair share counted). */
  servedTokens: bigint('served_tokens', { mode: 'number' }).notNull().default(0),
  /** Tasks claimed for it, in all. */
  servedTasks: bigint('served_tasks', { mode: 'number' }).notNull().default(0),
  /** Quota: most of its tasks held by agents at once (claimed, running, validating); null: no quota. */
  maxRunning: integer('max_running'),
  /** Quota: most of its tasks not yet finished; a submit past it is refused (429). Null: no quota. */
  maxQueued: integer('max_queued'),
  /** Quota: most USD its DAGs spend (and hold reserved) in one UTC day; past it, its work waits for the next day. Null: none. */
  maxUsdPerDay: numeric('max_usd_per_day', { mode: 'number' }),
  /** Quota: most estimated tokens of its tasks claimed in a minute; past it, its work waits for the minute to end. Null: none. */
  maxTokensPerMinute: integer('max_tokens_per_minute'),
  /** The minute its tokens are counted in (it starts with the first tokens folded after the last one ended), and how many. */
  minuteAt: timestamp('minute_at', { withTimezone: true }),
  minuteTokens: bigint('minute_tokens', { mode: 'number' }).notNull().default(0),
  /**
   * Set by the share loop while the tenant is past its money or tokens quota: claims pass its work over until then;
   * `quota_reason` says which quota and by how much (what `tenants list`, stats and the dashboard show).
   */
  quotaUntil: timestamp('quota_until', { withTimezone: true }),
  quotaReason: text('quota_reason'),
  /**
   * The transaction of the last claim that took tasks of this tenant while it has a running quota: a claim whose
   * snapshot does not see it would count the tenant's held tasks without that claim's, and passes the tenant over.
   */
  writer: xid8('writer'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [
  check('tenants_id_ck', sql`${t.id} ~ ${sql.raw(`'${TENANT_DEFAULTS.idPattern.source}'`)}`),
  check('tenants_weight_ck', sql`${t.weight} > 0 and ${t.weight} <= 1000`),
  // The fair-share claim's walk of tenants, in order of this key (tasks-claim/groups.ts tenantWalkCtes): an index step
  // per tenant visited, instead of ordering every tenant the agent covers on each claim. The expression is the claim's
  // (tenantOrderKey): the same expression, its constants of the same types, or PostgreSQL would not use the index for it.
  index('tenants_claim_order_idx').on(sql.raw(tenantOrderKey()), t.id),
]);

/**
 * What claims served each tenant since the share loop last folded it into tenants (one row per tenant per claim that
 * took its tasks, when more than one tenant exists): claims only insert, so no two claims wait on a tenant's row.
 */
export const tenantServed = pgTable('tenant_served', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  tenantId: text('tenant_id').notNull(),
  tokens: bigint('tokens', { mode: 'number' }).notNull(),
  tasks: integer('tasks').notNull(),
  at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [index('tenant_served_tenant_idx').on(t.tenantId)]);

export type TenantRow = typeof tenants.$inferSelect;
