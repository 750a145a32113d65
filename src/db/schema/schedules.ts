import { boolean, integer, jsonb, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';

/**
 * A cron schedule: the DAG file it fires (its YAML source, re-loaded with the
 * schedule's params at each fire), when, and what happened so far. The
 * scheduler locks due rows, fires, and advances `next_fire_at` in one
 * transaction; each fire's DAG carries the idempotency key
 * `cron:<name>:<instant>` (unique in its tenant), so a fire can never create two DAGs.
 * Names are per tenant: two tenants' schedules of one name are two schedules, and
 * neither tells the other it exists.
 */
export const schedules = pgTable('schedules', {
  name: text('name').notNull(),
  dagName: text('dag_name').notNull(),
  sourceFile: text('source_file'),
  source: text('source').notNull(),
  cron: text('cron').notNull(),
  timezone: text('timezone').notNull().default('UTC'),
  /** none | latest | all */
  catchup: text('catchup').notNull().default('latest'),
  catchupLimit: integer('catchup_limit').notNull().default(10),
  /** allow | skip | cancel_previous */
  overlap: text('overlap').notNull().default('allow'),
  enabled: boolean('enabled').notNull().default(true),
  params: jsonb('params').notNull().default(sql`'{}'::jsonb`),
  /** The tenant its DAGs belong to. */
  tenantId: text('tenant_id').notNull().default('default'),
  /** The first fire instant not yet handled (fired, skipped or missed). */
  nextFireAt: timestamp('next_fire_at', { withTimezone: true }).notNull(),
  lastFireAt: timestamp('last_fire_at', { withTimezone: true }),
  lastDagId: text('last_dag_id'),
  fires: integer('fires').notNull().default(0),
  skipped: integer('skipped').notNull().default(0),
  missed: integer('missed').notNull().default(0),
  /** Who registered it (`cli`, `admin:<token>`, `submit:<token>`): only they or an admin may replace it. Null before this was recorded. */
  createdBy: text('created_by'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [primaryKey({ columns: [t.tenantId, t.name] })]);
