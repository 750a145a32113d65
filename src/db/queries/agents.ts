import { and, asc, eq, ne, sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { rowsOf, textArray } from '../statement.js';
import { agents } from '../schema/index.js';
import type { AgentRegistration, AgentRow } from '../rows.js';

export type { AgentRegistration, AgentRow } from '../rows.js';

/**
 * When a registration may take over a row another process registered: only from a holder that is not active, has
 * been silent for `staleSec`, is this very registration (`instance`), or is the one the caller found gone
 * (`replaceable`, an instance whose process no longer runs). In the statement, so two processes starting at once
 * cannot both take one id.
 */
export interface UpsertGuard { staleSec: number; instance: string; replaceable?: string | null }

/**
 * Register, or re-register after a restart: capabilities and limits are replaced, spend is kept. With `guard`,
 * undefined when a live process holds the id (UpsertGuard).
 */
export async function agentUpsert(db: Db, a: AgentRegistration): Promise<AgentRow>;
export async function agentUpsert(db: Db, a: AgentRegistration, guard: UpsertGuard): Promise<AgentRow | undefined>;
export async function agentUpsert(db: Db, a: AgentRegistration, guard?: UpsertGuard): Promise<AgentRow | undefined> {
  const values = {
    id: a.id,
    type: a.type,
    capabilities: [...new Set(a.capabilities)].sort(),
    models: a.models ?? [],
    tenants: a.tenants ? [...new Set(a.tenants)].sort() : null,
    maxConcurrent: a.maxConcurrent ?? 1,
    budgetUsd: a.budgetUsd ?? null,
    dailyBudgetUsd: a.dailyBudgetUsd ?? null,
    metadata: a.metadata ?? {},
    status: 'active',
  };
  const [row] = await db
    .insert(agents)
    .values(values)
    .onConflictDoUpdate({
      target: agents.id,
      set: { ...values, heartbeatAt: sql`now()` },
      setWhere: guard && sql`${agents.status} <> 'active'
        or ${agents.heartbeatAt} < now() - make_interval(secs => ${guard.staleSec})
        or ${agents.metadata}->>'instance' = ${guard.instance}
        or ${agents.metadata}->>'instance' = ${guard.replaceable ?? null}`,
    })
    .returning();
  return row;
}

/** Who holds an agent id now: the process it registered from (its metadata), its status and how long it has been silent. */
export async function agentHolderGet(db: Db, id: string): Promise<{ status: string; metadata: Record<string, unknown>; silentSec: number } | undefined> {
  const [row] = await rowsOf<{ status: string; metadata: Record<string, unknown>; silent_sec: number }>(db, sql`
    select status, metadata, extract(epoch from now() - heartbeat_at)::float8 as silent_sec from agents where id = ${id}`);
  return row && { status: row.status, metadata: row.metadata, silentSec: row.silent_sec };
}

export async function agentGet(db: Db, id: string): Promise<AgentRow | undefined> {
  const [row] = await db.select().from(agents).where(eq(agents.id, id));
  return row;
}

/** Every agent, by id; `tenants`: only those that may serve one of them (registered for it, or for every tenant). */
export async function agentList(db: Db, tenants: readonly string[] | null = null): Promise<AgentRow[]> {
  return db.select().from(agents)
    .where(tenants ? sql`${agents.tenants} is null or ${agents.tenants} && ${textArray(tenants)}` : undefined).orderBy(asc(agents.id));
}

/** A heartbeat also brings an agent marked offline (heartbeats had stopped) back to active; draining stays draining. */
export async function agentHeartbeat(db: Db, id: string): Promise<boolean> {
  const r = await db.update(agents)
    .set({ heartbeatAt: sql`now()`, status: sql`case when ${agents.status} = 'offline' then 'active' else ${agents.status} end` })
    .where(eq(agents.id, id)).returning({ id: agents.id });
  return r.length > 0;
}

/**
 * A claim the agent made itself (a long poll, its own token) is a sign of life: its heartbeat time moves, so an
 * agent that only long-polls is not marked offline. An offline agent stays offline (it signed off, or went silent
 * long enough to be marked so): a heartbeat or a registration brings it back.
 */
export async function agentSeen(db: Db, id: string): Promise<void> {
  await db.update(agents).set({ heartbeatAt: sql`now()` }).where(and(eq(agents.id, id), ne(agents.status, 'offline')));
}

/**
 * Set an agent's status. With `instance`, only while the row is still that
 * process's registration: an old process draining on a rolling deploy must not
 * drain the new process that re-registered the same id.
 */
export async function agentStatusSet(db: Db, id: string, status: 'active' | 'draining' | 'offline', instance?: string): Promise<void> {
  const mine = instance === undefined ? undefined : sql`${agents.metadata}->>'instance' = ${instance}`;
  await db.update(agents).set({ status }).where(and(eq(agents.id, id), mine));
}

/** Mark agents whose heartbeats stopped more than `staleSec` ago offline; their tasks are left to the reaper. */
export async function agentMarkStaleOffline(db: Db, staleSec: number): Promise<string[]> {
  const r = await db
    .update(agents)
    .set({ status: 'offline' })
    .where(sql`${agents.status} <> 'offline' and ${agents.heartbeatAt} < now() - make_interval(secs => ${staleSec})`)
    .returning({ id: agents.id });
  return r.map((x) => x.id);
}

/**
 * Lock agent rows, in id order, for the rest of the transaction: what a transaction that will
 * settle spend on agents and DAGs in several statements does first (the lock order: agents, then DAGs).
 */
export async function agentsLock(db: Db, ids: ReadonlyArray<string | null>): Promise<void> {
  const wanted = [...new Set(ids.filter((i): i is string => i !== null))].sort();
  if (wanted.length === 0) return;
  await db.execute(sql`select id from agents where id = any(${textArray(wanted)}) order by id for no key update`);
}

/** The models of each active agent that judges (capability validate:judge): what a DAG's llm-judge steps can be served by. */
/** The models of each active judge agent (validate:judge) that serves the tenant (registered for it, or for every tenant). */
export async function agentJudgeModels(db: Db, tenant: string): Promise<string[][]> {
  const rows = await db.select({ models: agents.models }).from(agents)
    .where(sql`${agents.status} = 'active' and 'validate:judge' = any(${agents.capabilities}) and (${agents.tenants} is null or ${tenant} = any(${agents.tenants}))`);
  return rows.map((r) => r.models);
}
