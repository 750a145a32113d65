import { and, asc, eq, sql } from 'drizzle-orm';
import type { Db } from '../connection.js';
import { textArray } from './run.js';
import { agents } from '../schema/index.js';
import type { AgentRegistration, AgentRow } from '../rows.js';

export type { AgentRegistration, AgentRow } from '../rows.js';

/** Register, or re-register after a restart: capabilities and limits are replaced, spend is kept. */
export async function agentUpsert(db: Db, a: AgentRegistration): Promise<AgentRow> {
  const values = {
    id: a.id,
    type: a.type,
    capabilities: [...new Set(a.capabilities)].sort(),
    models: a.models ?? [],
    maxConcurrent: a.maxConcurrent ?? 1,
    budgetUsd: a.budgetUsd ?? null,
    metadata: a.metadata ?? {},
    status: 'active',
  };
  const [row] = await db
    .insert(agents)
    .values(values)
    .onConflictDoUpdate({ target: agents.id, set: { ...values, heartbeatAt: sql`now()` } })
    .returning();
  return row!;
}

export async function agentGet(db: Db, id: string): Promise<AgentRow | undefined> {
  const [row] = await db.select().from(agents).where(eq(agents.id, id));
  return row;
}

export async function agentList(db: Db): Promise<AgentRow[]> {
  return db.select().from(agents).orderBy(asc(agents.id));
}

/** A heartbeat also brings an agent marked offline (heartbeats had stopped) back to active; draining stays draining. */
export async function agentHeartbeat(db: Db, id: string): Promise<boolean> {
  const r = await db.update(agents)
    .set({ heartbeatAt: sql`now()`, status: sql`case when ${agents.status} = 'offline' then 'active' else ${agents.status} end` })
    .where(eq(agents.id, id)).returning({ id: agents.id });
  return r.length > 0;
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
export async function agentJudgeModels(db: Db): Promise<string[][]> {
  const rows = await db.select({ models: agents.models }).from(agents)
    .where(sql`${agents.status} = 'active' and 'validate:judge' = any(${agents.capabilities})`);
  return rows.map((r) => r.models);
}
