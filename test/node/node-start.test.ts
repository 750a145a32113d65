import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { pino } from 'pino';
import { testDatabase } from '../helpers/db.js';
import { dagCreate, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { nodeStart } from '../../src/node.js';
import { LOOP_NAMES, LOOPS_ELECTED } from '../../src/maintenance/index.js';
import { defineAgent } from '../../src/runtime/define-agent.js';

const database = await testDatabase();
const { db } = database;
const log = pino({ level: 'silent' });
const echo = defineAgent({ name: 'echo', capabilities: ['echo'], run: async (task) => ({ key: task.key }) });

const leases = () => rowsOf<{ name: string }>(db, sql`select name from maintenance_leases order by name`);
const agentStatus = () => rowsOf<{ id: string; status: string }>(db, sql`select id, status from agents order by id`);

describe('nodeStart: one process assembled', () => {
  const held: Server[] = [];
  afterAll(() => held.forEach((s) => s.close()));

  it('runs the loops, the agents and the HTTP API together, and stops them all', async () => {
    const dagId = await dagCreate(db, 'name: node\ntasks:\n  a: { type: echo, spec: { constraints: { capabilities: [echo] } } }\n  b: { type: echo, depends_on: [a], spec: { constraints: { capabilities: [echo] } } }\n');
    const node = await nodeStart({ database, log, agents: [{ def: echo }], instance: 'n1', http: { port: 0, host: '127.0.0.1' } });
    try {
      expect(node.loops.map((l) => l.name)).toEqual(LOOP_NAMES);
      expect(node.agents.map((a) => a.id)).toEqual(['echo-n1']);
      expect(await (await fetch(`${node.url}/healthz`)).json()).toEqual({ ok: true });
      await eventually('the DAG completes on this node\'s agent', async () => (await taskStatusByKey(db, dagId)).b === 'completed');
      await eventually('this node holds the elected loops\' leases', async () => (await leases()).length === LOOPS_ELECTED.length);
    } finally {
      await node.stop();
    }
    await node.stop(); // idempotent
    expect(await leases()).toEqual([]);
    expect(await agentStatus()).toEqual([{ id: 'echo-n1', status: 'offline' }]);
    await expect(fetch(`${node.url}/healthz`)).rejects.toThrow();
  });

  it('a step that fails to start (the port is taken) stops what started before it, and throws', async () => {
    const taken = createServer();
    held.push(taken);
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as AddressInfo).port;
    const failed = await nodeStart({ database, log, agents: [{ def: echo }], instance: 'n2', http: { port, host: '127.0.0.1' } }).catch((e: NodeJS.ErrnoException) => e);
    expect((failed as NodeJS.ErrnoException).code).toBe('EADDRINUSE');
    expect(await leases()).toEqual([]);
    expect((await agentStatus()).find((a) => a.id === 'echo-n2')).toEqual({ id: 'echo-n2', status: 'offline' });
  });
});
