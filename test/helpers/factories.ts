import { getTableName, is, sql } from 'drizzle-orm';
import { PgTable } from 'drizzle-orm/pg-core';
import * as schema from '../../src/db/schema/index.js';
import type { Db } from '../../src/db/handle.js';
import { dagSourceLoad } from '../../src/dag/load.js';
import type { DagSpec } from '../../src/dag/spec.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';

/** A DagSpec from inline YAML (the same path files take). */
export function dagSpec(yaml: string, params: Record<string, string> = {}): Promise<DagSpec> {
  return dagSourceLoad(yaml, 'inline.yaml', { params });
}

export async function dagCreate(db: Db, yaml: string, params: Record<string, string> = {}): Promise<string> {
  const [r] = await dagSubmit(db, [await dagSpec(yaml, params)]);
  return r!.dagId;
}

/** `a -> b -> c …` as DAG YAML: each task depends on the one before. */
export function chainYaml(name: string, length: number, extra = ''): string {
  const lines = [`name: ${name}`, 'tasks:'];
  for (let i = 0; i < length; i++) {
    lines.push(`  t${i}:`, '    type: noop');
    if (i > 0) lines.push(`    depends_on: [t${i - 1}]`);
    if (extra) lines.push(`    ${extra}`);
  }
  return lines.join('\n');
}

export async function agentCreate(
  db: Db, id: string, capabilities: string[] = [], budgetUsd?: number, more: { models?: string[]; maxConcurrent?: number } = {},
): Promise<string> {
  // A test agent holds up to 100 tasks unless the test is about that limit (the registration default is 1).
  await agentRegister(db, { id, type: 'test', capabilities, budgetUsd, maxConcurrent: more.maxConcurrent ?? 100, models: more.models });
  return id;
}

/** Claim and complete tasks as `agentId` until nothing is claimable; returns task keys in completion order. */
export async function drain(db: Db, agentId: string, output: (key: string) => unknown = (k) => ({ by: agentId, key: k })): Promise<string[]> {
  const order: string[] = [];
  for (;;) {
    const claimed = await taskClaim(db, agentId, { limit: 10 });
    if (claimed.length === 0) return order;
    for (const t of claimed) {
      await taskComplete(db, { taskId: t.id, fence: t.fence, output: output(t.key) });
      order.push(t.key);
    }
  }
}

/** Move a task's lease into the past, as if its holder went silent (the database clock keeps running). */
export async function leaseExpire(db: Db, taskId: string): Promise<void> {
  await db.execute(sql`update tasks set lease_expires_at = now() - interval '1 second' where id = ${taskId}`);
}

/** Make a RETRYING task due now, as if its backoff elapsed. */
export async function retryDue(db: Db, taskId: string): Promise<void> {
  await db.execute(sql`update tasks set run_at = now() - interval '1 millisecond' where id = ${taskId}`);
}

export async function taskStatusByKey(db: Db, dagId: string): Promise<Record<string, string>> {
  const { rows } = await db.execute<{ key: string; status: string }>(sql`select key, status from tasks where dag_id = ${dagId}`);
  return Object.fromEntries(rows.map((r) => [r.key, r.status]));
}

/** Every dagent table, from the schema (a new table is in the snapshot and the reset without being listed here). */
const TABLES = (Object.values(schema) as unknown[]).filter((t): t is PgTable => is(t, PgTable)).map((t) => getTableName(t)).sort();

/** Tables whose rows are the node's own bookkeeping (loop leases and gates), not what an operation under test writes. */
const BOOKKEEPING = new Set(['maintenance_gates', 'maintenance_leases', 'concurrency_keys', 'concurrency_releases']);

/** Every row of every dagent table, to prove an operation changed nothing. */
export async function databaseSnapshot(db: Db): Promise<string> {
  const tables = TABLES.filter((t) => !BOOKKEEPING.has(t));
  const out: Record<string, unknown> = {};
  for (const t of tables) out[t] = (await db.execute(sql.raw(`select * from ${t} order by 1`))).rows;
  return JSON.stringify(out);
}

/** Empty every dagent table: for test files whose tests must not see each other's tasks. */
export async function databaseReset(db: Db): Promise<void> {
  // A file's own maintenance loops (a promoter started for the whole file) may be in a transaction that holds one of
  // these tables and then asks for another the truncate already holds: PostgreSQL ends one of the two (40P01). The
  // loop retries at its next tick; the reset, here, at once.
  for (let attempt = 1; ; attempt++) {
    try {
      // api_tokens stay: a test file's HTTP server keeps its tokens across tests.
      await db.execute(sql.raw(`truncate ${TABLES.filter((t) => t !== 'api_tokens').join(', ')}`));
      // The default tenant is the migration's row, which every DAG without a tenant refers to.
      await db.execute(sql`insert into tenants (id, name) values ('default', 'the default tenant')`);
      return;
    } catch (err) {
      const code = (err as { code?: string; cause?: { code?: string } }).cause?.code ?? (err as { code?: string }).code;
      if (code !== '40P01' || attempt === 5) throw err;
    }
  }
}

/** Rows of a hand-written query, for assertions. */
export async function rowsOf<T>(db: Db, q: ReturnType<typeof sql>): Promise<T[]> {
  return (await db.execute(q)).rows as T[];
}

/**
 * What a reaper does once `agentId`'s process is gone (killed or stopped): its running tasks' leases moved into the
 * past, and the reaper (`runOnce`, which must take back exactly one) hands the task back.
 */
export async function leaseLapsedReaped(db: Db, reaper: { runOnce(): Promise<number> }, agentId: string): Promise<void> {
  await db.execute(sql`update tasks set lease_expires_at = now() - interval '1 second' where claimed_by = ${agentId} and status = 'running'`);
  const taken = await reaper.runOnce();
  if (taken !== 1) throw new Error(`the reaper took back ${taken} tasks of ${agentId}, not 1`);
}
