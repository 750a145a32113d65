import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import pg from 'pg';
import { testDatabase } from '../helpers/db.js';
import { testHttp, type TestHttp } from '../helpers/http.js';
import { eventually } from '../helpers/wait.js';
import { dagCreate, databaseReset } from '../helpers/factories.js';
import { ReadyListener } from '../../src/db/ready-listener.js';
import { EVENTS_CHANNEL, READY_CHANNEL, REVOKED_CHANNEL, STREAM_CHANNEL } from '../../src/db/statement.js';
import { ClaimWaiters, hintSeed, hintShare } from '../../src/claim-wait/waiters.js';
import { groupProbe } from '../../src/claim-wait/claim-when-ready.js';

// Two nodes on one database, each with its one LISTEN connection as `dagent up` has: every READY hint reaches both,
// and each wakes only its part of it, so N tasks that become READY cost N claims in all, not N per node.
const database = await testDatabase();
const { db } = database;
const channels = [READY_CHANNEL, EVENTS_CHANNEL, REVOKED_CHANNEL, STREAM_CHANNEL];
const listeners = [new ReadyListener({ url: database.sessionUrl, channels }), new ReadyListener({ url: database.sessionUrl, channels })];
await Promise.all(listeners.map((l) => l.start()));
afterAll(() => Promise.all(listeners.map((l) => l.stop())));
// Each node looks again after 300 ms, not CLAIM_WAIT_DEFAULTS' few: what is checked is who claims, and a claim on a
// busy test machine may take longer than the default.
const waiters = listeners.map((listener) => new ClaimWaiters({
  databaseUrl: database.sessionUrl, listener, perAgent: 4, max: 100, readyInGroup: groupProbe(db), lookAgainMs: 300,
}));
afterAll(() => Promise.all(waiters.map((w) => w.close())));
const nodes: TestHttp[] = await Promise.all(listeners.map((listener, i) => testHttp(database, { listener, claimWaiters: waiters[i] })));
beforeEach(() => databaseReset(db));

async function metric(node: TestHttp, name: string, labels = ''): Promise<number> {
  const r = await node.call('GET', '/metrics');
  const line = (r.body as string).split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `));
  return line ? Number(line.split(' ')[1]) : 0;
}
/** The claims of this process, both nodes' together (the counter is the process's). */
const claims = async () => ({ empty: await metric(nodes[0]!, 'dagent_claims_total', 'result="empty"'), claimed: await metric(nodes[0]!, 'dagent_claims_total', 'result="claimed"') });
const waiting = (node: TestHttp, n: number) => eventually(`${n} claims waiting`, async () => (await metric(node, 'dagent_claims_waiting')) === n);

let agents = 0;
/** A registered shell agent, through `node`, and a long poll of it. */
async function poller(node: TestHttp, waitSec: number) {
  const id = `ws-${++agents}`;
  const token = await node.agentToken(id, ['shell']);
  expect((await node.call('POST', '/api/agents', { token, body: { id, type: 'w', capabilities: ['shell'], max_concurrent: 8 } })).status).toBe(201);
  return fetch(`${node.url}/api/agents/${id}/claim`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ wait_sec: waitSec }),
  }).then(async (r) => ((await r.json()) as { tasks: Array<{ key: string }> }).tasks.map((t) => t.key));
}

const shellTasks = (name: string, n: number) =>
  `name: ${name}\ntasks:\n${Array.from({ length: n }, (_, i) => `  t${i}: { type: w, spec: { constraints: { capabilities: [shell] } } }`).join('\n')}\n`;

describe('two nodes share each READY hint', () => {
  it('both read the same roster of two', async () => {
    // The roster is read when the first claim waits; a poll on each node makes both read it.
    const polls = [poller(nodes[0]!, 1), poller(nodes[1]!, 1)];
    await Promise.all(polls);
    await eventually('both nodes see two listeners', async () => listeners.every((l) => l.roster.members === 2));
    expect(listeners.map((l) => l.roster.rank).sort()).toEqual([0, 1]);
  });

  it('four tasks READY with three agents waiting on each node: four claims in all, none empty', async () => {
    const polls = [...Array.from({ length: 3 }, () => poller(nodes[0]!, 3)), ...Array.from({ length: 3 }, () => poller(nodes[1]!, 3))];
    await waiting(nodes[0]!, 3);
    await waiting(nodes[1]!, 3);
    // Counted from here: each poll's first claim (if it ran one) is behind it.
    const before = await claims();
    await dagCreate(db, shellTasks('four', 4));
    const got = await Promise.all(polls);
    expect(got.flat().sort()).toEqual(['t0', 't1', 't2', 't3']);
    // Two to each node: each node woke two of its three, and the two left on each timed out without a claim.
    expect(got.slice(0, 3).flat()).toHaveLength(2);
    expect(got.slice(3).flat()).toHaveLength(2);
    const after = await claims();
    expect(after.claimed - before.claimed).toBe(4);
    expect(after.empty - before.empty).toBe(0);
  });

  it('with agents waiting on one node only, every task is still claimed: the other node\'s part goes through the first one\'s hand-on', async () => {
    const polls = Array.from({ length: 5 }, () => poller(nodes[0]!, 10));
    await waiting(nodes[0]!, 5);
    await dagCreate(db, shellTasks('five', 5));
    const got = await Promise.all(polls);
    expect(got.flat().sort()).toEqual(['t0', 't1', 't2', 't3', 't4']);
    expect(got.every((keys) => keys.length === 1)).toBe(true);
  });

  it('a single task whose hint goes to the node with no agent waiting is still claimed, by the other node looking again', async () => {
    // What the hints were: the test listens too, under a name of its own, so it is no member of the roster.
    const client = new pg.Client({ connectionString: database.sessionUrl, application_name: 'wake-share-test' });
    await client.connect();
    const hints: string[] = [];
    client.on('notification', (n) => { if (n.payload) hints.push(n.payload); });
    await client.query(`listen ${READY_CHANNEL}`);
    try {
      await eventually('both nodes see two listeners', async () => listeners.every((l) => l.roster.members === 2));
      const idle = listeners[1]!.roster;
      /** The hint's part went to node 1, where no agent waits. */
      const toIdle = (payload: string) => hintShare(1, idle, hintSeed(payload)).wake === 1;
      // Until one hint went to node 1 (each does with even odds): each single task is claimed by node 0's agent all the same.
      for (let i = 0; i < 30 && !hints.some(toIdle); i++) {
        const poll = poller(nodes[0]!, 10);
        await waiting(nodes[0]!, 1);
        await dagCreate(db, shellTasks(`one-${i}`, 1));
        expect(await poll).toEqual(['t0']);
        await eventually('the hint heard', async () => hints.length === i + 1);
      }
      expect(hints.some(toIdle)).toBe(true);
    } finally {
      await client.end();
    }
  });
});
