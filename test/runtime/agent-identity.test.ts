import { spawn } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import os from 'node:os';
import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { cliWith } from '../helpers/cli.js';
import { dagCreate, databaseReset, rowsOf } from '../helpers/factories.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import { agentGet } from '../../src/db/queries/agents.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { tokenCreate } from '../../src/auth/tokens.js';

const database = await testDatabase();
const { db } = database;
const { runner, run } = agentRunners(database);
const http = await testHttp(database);
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
beforeEach(() => databaseReset(db));

const paid = defineAgent({
  name: 'writer', capabilities: [],
  async run(_task, ctx) {
    ctx.reportCost({ usd: 0.5, model: 'm' });
    return 'ok';
  },
});
const idle = defineAgent({ name: 'writer', capabilities: [], async run() { return null; } });

/** This process's process table, as the runtime records it (boot and pid namespace). */
const PID_SPACE = `${readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()}/${readlinkSync('/proc/self/ns/pid')}`;

/** A row another process registered under `id`, as the runtime writes it. */
async function heldBy(id: string, holder: { host: string; pid: number; silentSec?: number; status?: string; pidSpace?: string }) {
  const metadata = { host: holder.host, pid: holder.pid, pidSpace: holder.pidSpace ?? PID_SPACE, process: 'elsewhere', instance: 'theirs' };
  await db.execute(sql`insert into agents (id, type, status, heartbeat_at, metadata) values (${id}, 'writer', ${holder.status ?? 'active'},
    now() - make_interval(secs => ${holder.silentSec ?? 0}), ${JSON.stringify(metadata)}::jsonb)`);
}

/** The pid of a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await new Promise((r) => child.on('exit', r));
  return child.pid!;
}

describe('stable agent identity', () => {
  it('an agent is <name>-<instance> at every start, so its spend and history go on after a restart', async () => {
    const first = await run(paid, { instance: 'box-1' });
    expect(first.id).toBe('writer-box-1');
    const one = await dagCreate(db, 'name: one\ntasks:\n  a: { type: t }\n');
    await eventually('first DAG done', async () => (await dagGet(db, one))?.status === 'completed');
    await first.stop({ graceMs: 0 });
    expect((await agentGet(db, 'writer-box-1'))!.status).toBe('offline');

    const again = await run(paid, { instance: 'box-1' });
    expect(again.id).toBe('writer-box-1');
    const two = await dagCreate(db, 'name: two\ntasks:\n  a: { type: t }\n');
    await eventually('second DAG done', async () => (await dagGet(db, two))?.status === 'completed');
    expect((await agentGet(db, 'writer-box-1'))!.spentUsd).toBeCloseTo(1.0);
    const agents = await rowsOf<{ agent_id: string }>(db, sql`select distinct agent_id from attempts`);
    expect(agents).toEqual([{ agent_id: 'writer-box-1' }]);
    expect((await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from agents`))[0]!.n).toBe(1);
  });

  it('the instance label defaults to the host name', async () => {
    const r = await run(idle);
    expect(r.id).toBe(`writer-${os.hostname().replace(/[^A-Za-z0-9_.:-]/g, '-').slice(0, 64)}`);
  });

  it('live processes never share a default id: the next takes the next slot, even when they start at once', async () => {
    const together = [runner(idle, { instance: 'box' }), runner(idle, { instance: 'box' }), runner(idle, { instance: 'box' }), runner(idle, { instance: 'box' })];
    await Promise.all(together.map((r) => r.start()));
    expect(together.map((r) => r.id).sort()).toEqual(['writer-box', 'writer-box-2', 'writer-box-3', 'writer-box-4']);
    // One stops (offline): the next start takes its slot back, the lowest free one.
    const second = together.find((r) => r.id === 'writer-box-2')!;
    await second.stop({ graceMs: 0 });
    expect((await run(idle, { instance: 'box' })).id).toBe('writer-box-2');
  });

  it('takes over an id whose holder is gone (a process of this process table that exited, an earlier one with this pid, or one silent past the stale limit) and passes over a live one', async () => {
    await heldBy('writer-dead', { host: os.hostname(), pid: await deadPid() });
    expect((await run(idle, { instance: 'dead' })).id).toBe('writer-dead');
    expect((await agentGet(db, 'writer-dead'))!.metadata).toMatchObject({ pid: process.pid, host: os.hostname() });

    await heldBy('writer-quiet', { host: 'another-host', pid: 1, silentSec: 600 });
    expect((await run(idle, { instance: 'quiet' })).id).toBe('writer-quiet');

    await heldBy('writer-draining', { host: 'another-host', pid: 1, status: 'draining' });
    expect((await run(idle, { instance: 'draining' })).id).toBe('writer-draining');

    // Live elsewhere (another host, heard from just now), or a live process of this host: not taken.
    await heldBy('writer-remote', { host: 'another-host', pid: 1 });
    expect((await run(idle, { instance: 'remote' })).id).toBe('writer-remote-2');
    const alive = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)']);
    try {
      await heldBy('writer-local', { host: os.hostname(), pid: alive.pid! });
      expect((await run(idle, { instance: 'local' })).id).toBe('writer-local-2');
    } finally {
      alive.kill('SIGKILL');
    }
    // Same host name, another process table (a container beside this one, also pid 1): its pid says nothing here.
    await heldBy('writer-neighbour', { host: os.hostname(), pid: process.pid, pidSpace: 'other-boot/pid:[1]' });
    expect((await run(idle, { instance: 'neighbour' })).id).toBe('writer-neighbour-2');
    await heldBy('writer-earlier', { host: os.hostname(), pid: process.pid });
    expect((await run(idle, { instance: 'earlier' })).id).toBe('writer-earlier');
    const [remote] = await rowsOf<{ metadata: { instance: string } }>(db, sql`select metadata from agents where id = 'writer-remote'`);
    expect(remote!.metadata.instance).toBe('theirs');
  });

  it('an explicit id is the caller\'s to share: it re-registers even while another process holds it', async () => {
    await heldBy('fixed', { host: 'another-host', pid: 1 });
    expect((await run(idle, { id: 'fixed' })).id).toBe('fixed');
  });

  it('dagent agent run refuses a bad --instance, --id or DAGENT_AGENT_INSTANCE with exit 2, before starting anything', async () => {
    const badInstance = await cli('agent', 'run', 'agents/shell.ts', '--instance', 'no spaces');
    expect([badInstance.code, badInstance.stderr]).toEqual([2, expect.stringContaining('--instance: "no spaces" is not an instance label')]);
    const badId = await cli('agent', 'run', 'agents/shell.ts', '--id', '../up');
    expect([badId.code, badId.stderr]).toEqual([2, expect.stringContaining('--id: "../up" is not an agent id')]);
    const env = await cliWith({ ...process.env, DATABASE_URL: database.url, DAGENT_AGENT_INSTANCE: '-x' })('agent', 'run', 'agents/shell.ts');
    expect([env.code, env.stderr]).toEqual([2, expect.stringContaining('environment DAGENT_AGENT_INSTANCE: letters, digits')]);
    expect((await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from agents`))[0]!.n).toBe(0);
  });
});

describe('GET /api/whoami', () => {
  it('tells a token who it is: the agent an agent token acts as, none for the others; no token is 401', async () => {
    const agentToken = await http.agentToken('py-7', ['shell']);
    const asAgent = await http.call('GET', '/api/whoami', { token: agentToken });
    expect(asAgent.status).toBe(200);
    expect(asAgent.body).toMatchObject({ role: 'agent', agentId: 'py-7', grant: { capabilities: ['shell'] } });
    const { token: signalToken } = await tokenCreate(db, { role: 'signal' });
    const asSignal = await http.call('GET', '/api/whoami', { token: signalToken });
    expect([asSignal.status, asSignal.body.role, asSignal.body.agentId]).toEqual([200, 'signal', null]);
    expect((await http.call('GET', '/api/whoami', { token: null })).status).toBe(401);
  });
});
