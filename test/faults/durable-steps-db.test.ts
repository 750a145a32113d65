import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../src/db/open.js';
import type { Db } from '../../src/db/handle.js';
import { embeddedServerStart } from '../../src/db/embedded.js';
import { testDatabase } from '../helpers/db.js';
import { agentProcesses, type AgentProcess } from '../helpers/agent-process.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { paidApiStart } from '../helpers/paid-api.js';
import { faultProxy } from './helpers/proxy.js';

// Durable steps when the database fails under a step's write, in real agent processes: the write commits and its
// reply is lost, or the server restarts while the write is on its way. The runtime sends the write again once the
// database answers (runtime/until-reachable.ts) and the first write wins, so each paid call is made once, each step
// recorded once, and the agent is not blamed for the database's fault.
//
// No reaper runs here (the agents run without maintenance loops, and the test runs none), and the task's lease is
// long (heartbeat_sec 60: a 180 s lease): the task stays with its one attempt however long this machine takes to bring
// the database back, so every run makes the same five calls in the same attempt. A lapsed lease taken back by a
// reaper would make a second attempt that replays what was recorded: right too, but another test (durable-steps.test.ts).
const DAG = `name: paid-db\ntasks:
  t: { type: paid, spec: { constraints: { capabilities: [paid], heartbeat_sec: 60 }, input: { calls: 5 } } }\n`;
const STEPPER = 'test/fixtures/agents/stepper.ts';
/** Past the waits below put together, so a test that fails says which wait it was (a busy 2-core machine is slow). */
const TEST_TIMEOUT_MS = 150_000;
const answers = [1, 2, 3, 4, 5].map((i) => ({ answer: `/call/${i}` }));

const paidApi = await paidApiStart();
// The agent processes inherit this environment; the stepper fixture reads the paid API's address from it.
process.env.DAGENT_TEST_PAID_API = paidApi.url;
beforeEach(() => paidApi.reset());

// The lost reply: the agent's connections go through a fault proxy (its LISTEN too, unless a pooler's direct URL
// takes that elsewhere); the test reads the database directly.
const database = await testDatabase();
const proxy = await faultProxy(database.url);
const agentThroughProxy = agentProcesses(proxy.url);

// The restart: a server of this file's own, so stopping it touches no other file's database. The agent is given no
// direct URL: this process's (behind a pooler) leads to another server.
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-steps-restart-'));
chmodSync(dataDir, 0o755);
let ownServer = await embeddedServerStart({ dataDir, database: 'steps_restart', ephemeral: true });
const own = await databaseOpen({ url: ownServer.url, poolSize: 4 });
const agentOnOwnServer = agentProcesses(ownServer.url, null);
afterAll(async () => {
  await own.close();
  // A failed restart leaves the first server, already stopped, here.
  await ownServer.stop().catch(() => {});
  rmSync(dataDir, { recursive: true, force: true });
});

/** The step names recorded for the DAG's task, one entry per row. */
async function stepNames(db: Db, dagId: string): Promise<string[]> {
  return (await rowsOf<{ name: string }>(db, sql`select name from task_steps where dag_id = ${dagId} order by name`)).map((r) => r.name);
}

/**
 * The task completed with every call's answer, one attempt and no failure; five paid calls, once each; each step
 * recorded once (one row, one task.step_recorded event); and the agent did send a step's write again.
 */
async function expectEachCallOnce(db: Db, dagId: string, agent: AgentProcess): Promise<void> {
  const task = async () => (await rowsOf<{ status: string; output: unknown; attempts: number }>(db, sql`
    select status, output, attempts from tasks where dag_id = ${dagId}`))[0]!;
  await eventually('the task completed', async () => (await task()).status === 'completed', 60_000)
    .catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
  expect(paidApi.calls.map((c) => c.path)).toEqual(['/call/1', '/call/2', '/call/3', '/call/4', '/call/5']);
  expect(await task()).toMatchObject({ output: { results: answers }, attempts: 1 });
  const names = ['call 1', 'call 2', 'call 3', 'call 4', 'call 5'];
  expect(await stepNames(db, dagId)).toEqual(names);
  const recordedEvents = await rowsOf<{ step: string }>(db, sql`
    select data->>'step' as step from events where dag_id = ${dagId} and type = 'task.step_recorded' order by step`);
  expect(recordedEvents.map((e) => e.step)).toEqual(names);
  const attempts = await rowsOf<{ outcome: string; error_message: string | null; cost: number }>(db, sql`
    select a.outcome, a.error_message, round(a.cost_usd, 4)::float8 as cost from attempts a where a.dag_id = ${dagId}`);
  expect(attempts).toEqual([{ outcome: 'completed', error_message: null, cost: 0.05 }]);
  expect(agent.output()).toContain('step record: database unreachable, retrying');
}

describe('a step write whose reply is lost', () => {
  it('is sent again on a new connection once the connection breaks, and answers the step it recorded: five paid calls, one row per step, no failed attempt', async () => {
    const call2 = paidApi.hold('/call/2');
    const dagId = await dagCreate(database.db, DAG);
    const agent = await agentThroughProxy(STEPPER, 'stepper-muted');
    await call2.arrived;
    // From now on the database's answers to the agent are lost, and what it sends still commits: step 2's write
    // commits, and the agent waits for its reply.
    proxy.set('mute');
    try {
      call2.answer();
      await eventually('step call 2 committed', async () => (await stepNames(database.db, dagId)).includes('call 2'), 30_000)
        .catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
      // The connections break (a reset) and the network is back: the write is sent again on a new connection.
      proxy.set('drop');
    } finally {
      proxy.set('pass');
    }
    await expectEachCallOnce(database.db, dagId, agent);
  }, TEST_TIMEOUT_MS);
});

describe('a database restart during a step write', () => {
  it('the write is retried until the server is back on its port, then recorded once: five paid calls, one row per step, no failed attempt', async () => {
    const call3 = paidApi.hold('/call/3');
    const dagId = await dagCreate(own.db, DAG);
    const agent = await agentOnOwnServer(STEPPER, 'stepper-restart');
    await call3.arrived;
    const { url } = ownServer;
    await ownServer.stop();
    // Step 3's work is done while nothing can be written: its write finds no database and is retried.
    call3.answer();
    await eventually('the step write found no database', async () => agent.output().includes('step record: database unreachable'), 30_000)
      .catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
    ownServer = await embeddedServerStart({ dataDir, database: 'steps_restart', ephemeral: true });
    // The port file brings it back where it was: the agent's DATABASE_URL reaches it again.
    expect(ownServer).toMatchObject({ owned: true, url });
    await expectEachCallOnce(own.db, dagId, agent);
  }, TEST_TIMEOUT_MS);
});
