import type { Db } from '../db/connection.js';
import { agentHeartbeat, agentStatusSet, agentUpsert, type AgentRegistration, type AgentRow } from '../db/queries/agents.js';
import { eventInsertMany } from '../db/queries/events.js';
import { NotFoundError } from '../errors.js';

export type { AgentRegistration, AgentRow };

/** Register (or re-register) an agent: the claim reads its capabilities and budget from this row. */
export async function agentRegister(db: Db, reg: AgentRegistration): Promise<AgentRow> {
  const row = await agentUpsert(db, reg);
  await eventInsertMany(db, [{ type: 'agent.registered', agentId: reg.id, data: { capabilities: row.capabilities } }]);
  return row;
}

export async function agentBeat(db: Db, id: string): Promise<void> {
  if (!(await agentHeartbeat(db, id))) throw new NotFoundError('agent', id);
}

/** Stop the agent claiming. `instance`: only if the registration is still that process's (metadata.instance). */
export async function agentDrain(db: Db, id: string, instance?: string): Promise<void> {
  await agentStatusSet(db, id, 'draining', instance);
}

export async function agentDeregister(db: Db, id: string, instance?: string): Promise<void> {
  await agentStatusSet(db, id, 'offline', instance);
  await eventInsertMany(db, [{ type: 'agent.offline', agentId: id }]);
}
