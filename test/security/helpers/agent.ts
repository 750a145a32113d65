import { expect } from 'vitest';
import type { Db } from '../../../src/db/handle.js';
import { tokenCreate } from '../../../src/auth/tokens.js';
import type { ServerProcess } from './server.js';

export interface Held { id: string; fence: number; key: string }

/** An agent over HTTP with its own agent token and grant, registered with everything the grant allows. */
export async function httpAgent(
  s: ServerProcess, db: Db, id: string, grant: { capabilities?: string[]; validators?: string[]; models?: string[] }, reg: { models?: string[]; max_concurrent?: number } = {},
) {
  const { token } = await tokenCreate(db, { role: 'agent', agentId: id, ...grant });
  const capabilities = [...(grant.capabilities ?? []), ...(grant.validators ?? []).map((v) => `validate:${v}`)];
  // A test agent holds up to 50 tasks unless a test says otherwise (the registration default is 1).
  const registered = await s.call('POST', '/api/agents', { token, body: { id, type: 'test-agent', capabilities, models: grant.models, max_concurrent: 32, ...reg } });
  expect(registered.status, JSON.stringify(registered.body)).toBe(201);
  return {
    token,
    /** Claim (straight into RUNNING) what this agent may take of one DAG. */
    async claim(dagId: string, limit = 10): Promise<Held[]> {
      const r = await s.call('POST', `/api/agents/${id}/claim`, { token, body: { start: true, dag_id: dagId, limit } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body.tasks;
    },
    spawn: (t: Held, subtasks: unknown[]) => s.call('POST', `/api/tasks/${t.id}/spawn`, { token, body: { fence: t.fence, subtasks } }),
    complete: (t: Held, output: unknown) => s.call('POST', `/api/tasks/${t.id}/complete`, { token, body: { fence: t.fence, output } }),
    fail: (t: Held, body: Record<string, unknown>) => s.call('POST', `/api/tasks/${t.id}/fail`, { token, body: { fence: t.fence, ...body } }),
  };
}
