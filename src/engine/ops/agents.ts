import type { Db } from '../../db/handle.js';
import { agentGet, agentHeartbeat, agentHolderGet, agentList as agentRows, agentSeen, agentStatusSet, agentUpsert, type UpsertGuard } from '../../db/queries/agents.js';
import { LEASE_DEFAULTS } from '../../config/index.js';
import { taskHolderGet, taskHolderModels } from '../../db/queries/tasks-read.js';
import { modelUnusableError } from '../attempt/claim.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { ForbiddenError, LeaseLostError, NotFoundError } from '../../errors.js';
import type { AgentRegistration, AgentRow } from '../../db/rows.js';

export type { AgentRegistration, AgentRow, UpsertGuard };

/** Register (or re-register) an agent: the claim reads its capabilities and budget from this row. */
export async function agentRegister(db: Db, reg: AgentRegistration): Promise<AgentRow>;
/** With `guard`: only if no other live process holds the id (UpsertGuard); undefined, and nothing written, when one does. */
export async function agentRegister(db: Db, reg: AgentRegistration, guard: UpsertGuard): Promise<AgentRow | undefined>;
export async function agentRegister(db: Db, reg: AgentRegistration, guard?: UpsertGuard): Promise<AgentRow | undefined> {
  const row = guard ? await agentUpsert(db, reg, guard) : await agentUpsert(db, reg);
  if (!row) return undefined;
  await eventInsertMany(db, [{ type: 'agent.registered', agentId: reg.id, data: { capabilities: row.capabilities, host: stringOr(reg.metadata?.host), pid: typeof reg.metadata?.pid === 'number' ? reg.metadata.pid : null } }]);
  return row;
}

function stringOr(v: unknown): string | null {
  return typeof v === 'string' ? v.slice(0, 256) : null;
}

/** Who holds an agent id now (see agentHolderGet). */
export function agentHolder(db: Db, id: string) {
  return agentHolderGet(db, id);
}

export async function agentBeat(db: Db, id: string): Promise<void> {
  if (!(await agentHeartbeat(db, id))) throw new NotFoundError('agent', id);
}

/**
 * The agent claimed for itself (a long poll, its own token): a sign of life, so an agent that only long-polls is
 * not marked offline after `agentStaleSec`. Written at most once per third of that period (the row is read anyway).
 */
export async function agentClaimSeen(db: Db, row: AgentRow): Promise<void> {
  if (row.status === 'offline' || Date.now() - row.heartbeatAt.getTime() < (LEASE_DEFAULTS.agentStaleSec * 1000) / 3) return;
  await agentSeen(db, row.id);
}

/** Stop the agent claiming. `instance`: only if the registration is still that process's (metadata.instance). */
export async function agentDrain(db: Db, id: string, instance?: string): Promise<void> {
  await agentStatusSet(db, id, 'draining', instance);
}

export async function agentDeregister(db: Db, id: string, instance?: string): Promise<void> {
  await agentStatusSet(db, id, 'offline', instance);
  await eventInsertMany(db, [{ type: 'agent.offline', agentId: id }]);
}

/** The agent, or NotFoundError. */
export async function agentRequire(db: Db, id: string): Promise<AgentRow> {
  const row = await agentGet(db, id);
  if (!row) throw new NotFoundError('agent', id);
  return row;
}

/** Every registered agent, by id; `tenants`: only those that may serve one of them. */
export function agentList(db: Db, tenants: readonly string[] | null = null): Promise<AgentRow[]> {
  return agentRows(db, tenants);
}

/**
 * Check that `agentId` holds the task under `fence` (for callers that act for one
 * agent, like an agent's HTTP token). A stale fence says only "not yours any more"
 * (LeaseLostError); under the current fence, anyone but the holder is refused
 * (ForbiddenError). Fences only grow, so the transition's own fence guard then
 * pins the call to the very claim checked here.
 */
export async function taskHoldCheck(db: Db, taskId: string, fence: number, agentId: string, reportedModel?: string | null): Promise<void> {
  const h = await taskHolderGet(db, taskId);
  if (!h) throw new NotFoundError('task', taskId);
  if (h.fence !== fence) throw new LeaseLostError(taskId, fence, h.fence, h.status);
  if (h.claimedBy !== agentId) throw new ForbiddenError(`task ${taskId} is not held by agent ${agentId}`, { taskId, agentId });
  if (reportedModel) await reportedModelCheck(db, taskId, reportedModel);
}

/**
 * A model an agent says its attempt used must be one the attempt could use (modelUsable): it is charged to that
 * model, shown in the timeline's cost by model and, with a rate limit, may pause it for the fleet.
 */
async function reportedModelCheck(db: Db, taskId: string, model: string): Promise<void> {
  const m = await taskHolderModels(db, taskId);
  if (!m) throw new NotFoundError('task', taskId);
  const refused = modelUnusableError('body.model', model, m.taskModels, m.agentModels);
  if (refused) throw refused;
}
