import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { rowsOf } from '../helpers/factories.js';
import { serverStart } from './helpers/server.js';
import { httpAgent } from './helpers/agent.js';
import { innocentBystander } from './helpers/innocent.js';

/**
 * An agent's spawn can never make any task more urgent than the task it spawned from was: not its subtasks (a huge
 * estimate, a long chain), not the tasks upstream of what it adds (a dependent with a huge estimate lifts them on
 * the critical path), whatever it writes. Effective priority: lower is more urgent.
 */
const database = await testDatabase();
const { db } = database;
const server = await serverStart(database);

const urgency = async (dagId: string) => new Map((await rowsOf<{ key: string; p: number }>(db, sql`
  select key, effective_priority as p from tasks where dag_id = ${dagId}`)).map((r) => [r.key, r.p]));

async function hostHeld(name: string, extra = '') {
  const dagId = await server.submit(`name: ${name}
tasks:
  host: { type: w, spec: { constraints: { capabilities: [${name}] } } }
${extra}`);
  const agent = await httpAgent(server, db, `agent-${name}`, { capabilities: [name] });
  const [host] = await agent.claim(dagId);
  expect(host!.key).toBe('host');
  return { dagId, agent, host: host!, before: await urgency(dagId) };
}

describe('an agent\'s spawn and the queue', () => {
  it('a subtask with an estimate of 366 days is no more urgent than its parent', async () => {
    const bystander = await innocentBystander(server, database, 'spawn-priority-bystander');
    const { dagId, agent, host, before } = await hostHeld('huge-estimate');
    const r = await agent.spawn(host, [{ key: 'huge', type: 'w', estimate: '366d' }]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const after = await urgency(dagId);
    expect(after.get('host/huge')).toBeGreaterThanOrEqual(before.get('host')!);
    await bystander.finish();
  });

  it('the head of a chain of 200 subtasks is no more urgent than its parent', async () => {
    const { dagId, agent, host, before } = await hostHeld('long-chain');
    const chain = Array.from({ length: 200 }, (_, i) => ({ key: `c${i}`, type: 'w', ...(i ? { depends_on: [`c${i - 1}`] } : {}) }));
    const r = await agent.spawn(host, chain);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const after = await urgency(dagId);
    for (let i = 0; i < 200; i++) expect(after.get(`host/c${i}`)).toBeGreaterThanOrEqual(before.get('host')!);
  });

  it('a dependent with a huge estimate does not lift the READY task it depends on, which the agent does not hold', async () => {
    const { dagId, agent, host, before } = await hostHeld('lift-upstream', '  ready-one: { type: w, spec: { constraints: { capabilities: [someone-else] } } }\n');
    const r = await agent.spawn(host, [{ key: 'dep', type: 'w', depends_on: ['ready-one'], estimate: '366d' }]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const after = await urgency(dagId);
    const [readyOne] = await rowsOf<{ status: string }>(db, sql`select status from tasks where dag_id = ${dagId} and key = 'ready-one'`);
    expect(readyOne!.status).toBe('ready');
    expect(after.get('ready-one')).toBeGreaterThanOrEqual(before.get('ready-one')!);
    expect(after.get('host/dep')).toBeGreaterThanOrEqual(before.get('host')!);
  });
});
