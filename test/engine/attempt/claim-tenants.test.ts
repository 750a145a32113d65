import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import type { HandOff } from '../../../src/db/rows.js';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskCompleteMany } from '../../../src/engine/attempt/complete.js';
import { agentRegister } from '../../../src/engine/ops/agents.js';
import { taskSpawn } from '../../../src/engine/dag/spawn.js';
import { dagSubmit } from '../../../src/engine/dag/submit.js';
import { tenantCreate } from '../../../src/engine/ops/tenants.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagSpec, databaseReset, rowsOf } from '../../helpers/factories.js';

// Tenants at claim: an agent takes only the tenants' work it serves; what a tenant's task adds (subtasks) is the
// tenant's; a completion does not hand its agent a dependent while another tenant has work that agent could take.
const database = await testDatabase();
const { db } = database;
beforeEach(async () => {
  await databaseReset(db);
  await tenantCreate(db, { id: 'team-a' });
  await tenantCreate(db, { id: 'team-b' });
});

async function submit(tenant: string, yaml: string): Promise<string> {
  const [r] = await dagSubmit(db, [await dagSpec(yaml)], { tenant });
  return r!.dagId;
}
const tenantOf = async (taskId: string) => (await rowsOf<{ tenant_id: string }>(db, sql`select tenant_id from tasks where id = ${taskId}`))[0]!.tenant_id;

describe('tenants at claim', () => {
  it('an agent registered for some tenants claims only their tasks; one registered for none claims any tenant\'s', async () => {
    const a = await submit('team-a', 'name: a\ntasks:\n  x: { type: t }\n  y: { type: t }\n');
    const b = await submit('team-b', 'name: b\ntasks:\n  x: { type: t, priority: 1 }\n');
    await agentRegister(db, { id: 'only-a', type: 'test', capabilities: [], tenants: ['team-a'], maxConcurrent: 10 });
    const claimed = await taskClaim(db, 'only-a', { limit: 10 });
    expect(claimed.map((t) => t.dagId).sort()).toEqual([a, a]);
    await agentCreate(db, 'any');
    const rest = await taskClaim(db, 'any', { limit: 10 });
    expect(rest.map((t) => t.dagId)).toEqual([b]);
  });

  it('a subtask is its parent\'s tenant\'s', async () => {
    await submit('team-b', 'name: b\ntasks:\n  parent: { type: t }\n');
    await agentCreate(db, 'w');
    const [parent] = await taskClaim(db, 'w', { limit: 1 });
    const { children: [child] } = await taskSpawn(db, { taskId: parent!.id, fence: parent!.fence }, [{ key: 'child', type: 't' }]);
    expect(await tenantOf(child!.id)).toBe('team-b');
    expect(await rowsOf(db, sql`select cap_key, tenant_id from capability_groups where tenant_id = 'team-b'`)).toEqual([{ cap_key: '', tenant_id: 'team-b' }]);
  });

  it('a completion hands its agent the dependent only while no other tenant has work the agent could take', async () => {
    const hand: HandOff = { agentId: 'hand', capabilities: [], max: 5, start: true, claimTtlSec: 60 };
    await agentCreate(db, 'hand');
    const pair = 'name: pair\ntasks:\n  up: { type: t }\n  down: { type: t, depends_on: [up], priority: 1 }\n';
    const first = await submit('team-a', pair);
    const [up] = await taskClaim(db, 'hand', { limit: 1, dagId: first, start: true });
    const alone = await taskCompleteMany(db, [{ taskId: up!.id, fence: up!.fence, output: 1 }], { handTo: hand });
    expect(alone.handed.map((t) => t.key)).toEqual(['down']);
    // Now team-b has READY work (less urgent than team-a's dependent): fair share, not the hand-off, decides.
    await submit('team-b', 'name: waiting\ntasks:\n  w: { type: t, priority: 90 }\n');
    const second = await submit('team-a', pair);
    const [up2] = await taskClaim(db, 'hand', { limit: 1, dagId: second, start: true });
    const shared = await taskCompleteMany(db, [{ taskId: up2!.id, fence: up2!.fence, output: 1 }], { handTo: hand });
    expect(shared.handed).toEqual([]);
    expect(await rowsOf(db, sql`select status from tasks where dag_id = ${second} and key = 'down'`)).toEqual([{ status: 'ready' }]);
  });
});
