import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { faultProxy } from './helpers/proxy.js';

// A lost claim reply spent an attempt: the claim committed, its reply never reached the agent,
// the lease lapsed and counted as a failed attempt (with max_attempts: 1, a dead letter for a task
// that never ran). Now the agent process hands such tasks back once it reaches the database again,
// and the reaper does not charge a lease that lapsed before any sign of life.
const database = await testDatabase();
const { db } = database;
const proxy = await faultProxy(database.url);
const agentProcess = agentProcesses(proxy.url);

describe('a claim whose reply is lost', () => {
  it('is released by the agent process once the database answers again; the task then runs once, with its one attempt', async () => {
    // It claims when a notification wakes it (no polling), so no claim is in flight when the answers stop.
    const agent = await agentProcess('test/fixtures/agents/alpha.ts', 'lost-reply', ['--poll-ms', '600000', '--no-maintenance']);
    // The agent has run a task, so its claim loop is past its first claim, and then is quiet: every one of its
    // connections idle for half a second. Muting while a claim is in flight would stall that claim instead.
    const warmUp = await dagCreate(db, 'name: warm-up\ntasks:\n  first: { type: t, spec: { constraints: { capabilities: [alpha] } } }\n');
    await eventually('the warm-up task completed', async () => (await rowsOf<{ status: string }>(db, sql`select status from tasks where dag_id = ${warmUp}`))[0]!.status === 'completed', 15_000);
    await eventually('the agent is quiet', async () => {
      const ports = proxy.backendPorts();
      const [row] = await rowsOf<{ busy: number; idle: number }>(db, sql`
        select count(*) filter (where state <> 'idle' or state_change > now() - interval '500 milliseconds')::int as busy,
               count(*) filter (where state = 'idle')::int as idle
          from pg_stat_activity where client_port = any(${sql.raw(`array[${ports.join(',') || 'null'}]::int[]`)})`);
      return row!.busy === 0 && row!.idle >= 1;
    }, 15_000);
    // From now on the database's answers to the agent's statements are lost (its notifications still arrive):
    // the claim the new task's notification wakes commits unseen.
    proxy.set('mute');
    const dagId = await dagCreate(db, 'name: lost-reply\ntasks:\n  only: { type: t, max_attempts: 1, spec: { constraints: { capabilities: [alpha] } } }\n');
    await eventually('the claim committed', async () => (await rowsOf<{ n: number }>(db, sql`
      select count(*)::int as n from tasks where dag_id = ${dagId} and claimed_by = 'lost-reply'`))[0]!.n === 1, 15_000).catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
    // The connections break (a reset), and then the network is back.
    proxy.set('drop');
    await new Promise((r) => setTimeout(r, 300));
    proxy.set('pass');
    await eventually('completed', async () => (await rowsOf<{ status: string }>(db, sql`select status from tasks where dag_id = ${dagId}`))[0]!.status === 'completed', 20_000);
    const attempts = await rowsOf<{ outcome: string; error_message: string | null; attempt: number }>(db, sql`
      select a.outcome, a.error_message, a.attempt from attempts a join tasks t on t.id = a.task_id where t.dag_id = ${dagId} order by a.fence`);
    expect(attempts).toEqual([
      { outcome: 'released', error_message: "the claim's reply was lost; released by lost-reply", attempt: 1 },
      { outcome: 'completed', error_message: null, attempt: 1 },
    ]);
    expect(agent.output()).toMatch(/released a task whose claim reply was lost/);
  });

  it('also when the reply lost is a completion\'s that handed the agent the next task: that task is released, then runs once', async () => {
    const agent = await agentProcess('test/fixtures/agents/sleeper.ts', 'lost-hand-off', ['--poll-ms', '600000', '--no-maintenance']);
    const dagId = await dagCreate(db, `name: lost-hand-off
tasks:
  slow: { type: t, spec: { input: { ms: 1500 }, constraints: { capabilities: [sleep] } } }
  next: { type: t, depends_on: [slow], max_attempts: 1, spec: { input: { ms: 0 }, constraints: { capabilities: [sleep] } } }
`);
    const statusOf = async (key: string) => (await rowsOf<{ status: string; claimed_by: string | null }>(db, sql`
      select status, claimed_by from tasks where dag_id = ${dagId} and key = ${key}`))[0]!;
    await eventually('slow is running', async () => (await statusOf('slow')).status === 'running', 15_000);
    // Its handler sleeps; the agent's connections go quiet, and from then on its answers are lost.
    await eventually('the agent is quiet', async () => {
      const ports = proxy.backendPorts();
      const [row] = await rowsOf<{ busy: number }>(db, sql`
        select count(*) filter (where state <> 'idle' or state_change > now() - interval '300 milliseconds')::int as busy
          from pg_stat_activity where client_port = any(${sql.raw(`array[${ports.join(',') || 'null'}]::int[]`)})`);
      return row!.busy === 0;
    }, 15_000);
    proxy.set('mute');
    // The completion of slow commits unseen, and with it the hand-off of next to the agent.
    await eventually('next handed to the agent', async () => {
      const [slow, next] = [await statusOf('slow'), await statusOf('next')];
      return slow.status === 'completed' && next.status === 'running' && next.claimed_by === 'lost-hand-off';
    }, 15_000).catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
    proxy.set('drop');
    await new Promise((r) => setTimeout(r, 300));
    proxy.set('pass');
    await eventually('next completed', async () => (await statusOf('next')).status === 'completed', 20_000)
      .catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
    const attempts = await rowsOf<{ key: string; outcome: string; attempt: number }>(db, sql`
      select t.key, a.outcome, a.attempt from attempts a join tasks t on t.id = a.task_id where t.dag_id = ${dagId} order by t.key, a.fence`);
    expect(attempts).toEqual([
      { key: 'next', outcome: 'released', attempt: 1 },
      { key: 'next', outcome: 'completed', attempt: 1 },
      { key: 'slow', outcome: 'completed', attempt: 1 },
    ]);
  });
});
