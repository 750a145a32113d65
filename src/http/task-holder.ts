import { z } from 'zod';
import { taskHoldCheck } from '../engine/ops/agents.js';
import type { Principal } from '../auth/tokens.js';
import type { HttpDeps } from './deps.js';

/** What the agent routes share: the fence a report presents, and the check that the agent holds the task. */

// A fence is a PostgreSQL integer: a larger number is no fence any claim returned (and must not reach the database as one).
export const fence = z.number().int().min(0).max(2_147_483_647).describe('the fencing token the claim returned');

/**
 * An agent token may touch only a task its agent holds, under the fence of that hold (an admin may act on any), and
 * name as the model it used only one the attempt could use.
 */
export async function holding(d: HttpDeps, p: Principal | null, taskId: string, presented: number, reportedModel?: string | null): Promise<void> {
  if (p?.role === 'agent') await taskHoldCheck(d.db, taskId, presented, p.agentId!, reportedModel);
}

