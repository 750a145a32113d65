import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, taskStatusByKey } from '../helpers/factories.js';
import { CLI_COMPILED } from '../helpers/cli.js';
import { leash } from '../helpers/child-leash.js';
import { LOOP_NAMES } from '../../src/maintenance/index.js';
import { eventually } from '../helpers/wait.js';

const database = await testDatabase();
const { db } = database;

describe('dagent up (real process)', () => {
  it('runs the maintenance loops until SIGTERM, then exits 0', async () => {
    const dagId = await dagCreate(db, 'name: up\ntasks:\n  x: { type: t, retry: { strategy: fixed, initial_delay: 1s, jitter: 0 } }\n');
    const agentId = await agentCreate(db, 'up-agent');
    const [x] = await taskClaim(db, agentId);
    await taskFail(db, { taskId: x!.id, fence: x!.fence, errorClass: 'crash', message: 'boom' });
    expect((await taskStatusByKey(db, dagId)).x).toBe('retrying');

    // Leashed: a failed assertion before the SIGTERM below must not leave `dagent up` running after the tests.
    const child = leash(spawn(process.execPath, [...CLI_COMPILED, 'up'], { env: { ...process.env, DATABASE_URL: database.url, DAGENT_HTTP_PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] }));
    let stdout = '';
    child.stdout.on('data', (b) => (stdout += b));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    // The promoter in the child moves the task to READY once its retry time (1 s, database clock) passes.
    await eventually('the promoter in dagent up made it READY', async () => (await taskStatusByKey(db, dagId)).x === 'ready');
    expect((await taskStatusByKey(db, dagId)).x).toBe('ready');
    // Every loop of the registry, in its order.
    expect(stdout).toContain(`dagent up: ${LOOP_NAMES.join(', ')} running`);
    // The promoter ran in the child because the child holds its lease; stopping gives its leases up at once.
    const { rows } = await db.execute<{ name: string; holder: string }>(sql`select name, holder from maintenance_leases where name = 'promoter'`);
    expect(rows).toEqual([{ name: 'promoter', holder: expect.stringMatching(new RegExp(`/${child.pid}/`)) }]);

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stdout).toContain('dagent up: stopped');
    expect((await db.execute(sql`select name from maintenance_leases`)).rows).toEqual([]);
  });

  it('also runs the agents named by --agent and DAGENT_AGENTS, and drains them on SIGTERM', async () => {
    const dagId = await dagCreate(db, `
name: up-agents
tasks:
  a: { type: t, spec: { constraints: { capabilities: [alpha] } } }
  b: { type: t, depends_on: [a], spec: { constraints: { capabilities: [beta] } } }
`);
    const child = leash(spawn(process.execPath, [...CLI_COMPILED, 'up', '--agent', 'test/fixtures/agents/alpha.ts:1'], {
      env: { ...process.env, DATABASE_URL: database.url, DAGENT_HTTP_PORT: '0', DAGENT_AGENTS: 'test/fixtures/agents/beta.ts' }, stdio: ['ignore', 'pipe', 'pipe'],
    }));
    let stdout = '';
    child.stdout.on('data', (b) => (stdout += b));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await eventually('the agents in dagent up ran the DAG', async () => (await taskStatusByKey(db, dagId)).b === 'completed');
    expect(await taskStatusByKey(db, dagId)).toEqual({ a: 'completed', b: 'completed' });
    // The banner comes once the HTTP API listens too, which may be after the agents ran the DAG.
    await eventually('the banner', async () => /agents beta-\S+, alpha-\S+/.test(stdout));
    expect(stdout).toMatch(/agents beta-\S+, alpha-\S+/);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const { rows } = await db.execute<{ type: string; status: string; max_concurrent: number }>(sql`select type, status, max_concurrent from agents where type in ('alpha', 'beta') order by type`);
    expect(rows).toEqual([{ type: 'alpha', status: 'offline', max_concurrent: 1 }, { type: 'beta', status: 'offline', max_concurrent: 2 }]);
  });
});
