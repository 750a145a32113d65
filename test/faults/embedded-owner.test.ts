import { spawn, type ChildProcess } from 'node:child_process';
import { leash } from '../helpers/child-leash.js';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI_COMPILED, cliWith } from '../helpers/cli.js';
import { eventually } from '../helpers/wait.js';

// The embedded PostgreSQL died with whichever process started it: with `dagent up` in one
// terminal and `dagent agent run` in another, stopping the first left the second with
// ECONNREFUSED for ever. Now the processes using the data folder bring it back.
// This file runs its own embedded server in a folder of its own, whatever DATABASE_URL says.
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-owner-'));
chmodSync(dataDir, 0o755);
const env: NodeJS.ProcessEnv = { ...process.env, DAGENT_DATA_DIR: dataDir, DAGENT_LOG_LEVEL: 'warn' };
delete env.DATABASE_URL;
const cli = cliWith(env);
const children: ChildProcess[] = [];

function dagent(...args: string[]) {
  const child = leash(spawn(process.execPath, [...CLI_COMPILED, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] }));
  children.push(child);
  let out = '';
  child.stdout!.on('data', (b) => (out += b));
  child.stderr!.on('data', (b) => (out += b));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, output: () => out };
}

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await cli('db', 'stop');
  rmSync(dataDir, { recursive: true, force: true });
});

describe('the embedded server outlives the process that started it', () => {
  it('dagent up starts it, an agent joins; when up exits the agent starts it again and goes on; db stop stops it for good', async () => {
    const up = dagent('up', '--no-http');
    await eventually('up running', async () => /dagent up: .* running/.test(up.output()), 60_000);
    const owner = await cli('db', 'status', '--json');
    expect(owner.json()).toMatchObject({ running: true, stoppedByOperator: false });
    const agent = dagent('agent', 'run', 'test/fixtures/agents/alpha.ts', '--id', 'survivor', '--no-maintenance', '--poll-ms', '300');
    await eventually('agent running', async () => /running with capabilities/.test(agent.output()), 30_000);

    up.child.kill('SIGTERM');
    expect(await up.exited).toBe(0);
    await eventually('the agent started the server again', async () => /embedded PostgreSQL server had stopped .*started it again/.test(agent.output()), 20_000);
    // Under load the restarted server may still be coming up when the agent's line is written.
    let after: { running: boolean; port: number; pid: number } = { running: false, port: 0, pid: 0 };
    await eventually('db status sees the server again', async () => (after = (await cli('db', 'status', '--json')).json()).running, 15_000);
    expect(after).toMatchObject({ running: true, port: owner.json().port });
    expect(after.pid).not.toBe(owner.json().pid);

    // The agent works on: a DAG submitted now is completed by it.
    const submitted = await cli('submit', 'test/fixtures/dags/alpha-one.yaml', '--json');
    expect(submitted.code, submitted.stderr).toBe(0);
    const dagId = submitted.json()[0].dagId;
    await eventually('completed by the surviving agent', async () => (await cli('status', dagId, '--json')).json().dag.status === 'completed', 20_000);

    // An operator's stop holds: the agent does not bring the server back.
    const stop = await cli('db', 'stop', '--json');
    expect(stop.json()).toMatchObject({ stopped: true, wasRunning: true });
    await new Promise((r) => setTimeout(r, 3_000));
    expect((await cli('db', 'status', '--json')).json()).toMatchObject({ running: false, stoppedByOperator: true });
    agent.child.kill('SIGKILL');
  });

  it('db status and db stop refuse when DATABASE_URL is set (exit 2)', async () => {
    const withUrl = cliWith({ ...env, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/x' });
    const r = await withUrl('db', 'status');
    expect([r.code, r.stderr]).toEqual([2, expect.stringMatching(/DATABASE_URL is set: dagent uses that server/)]);
  });
});
