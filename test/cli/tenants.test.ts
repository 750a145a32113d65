import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { CLI_COMPILED } from '../helpers/cli.js';
import { testDatabase } from '../helpers/db.js';
import { databaseSnapshot, rowsOf } from '../helpers/factories.js';

/** `dagent tenants …` and `dagent submit --tenant`, as users run them: the compiled CLI in a child process. */
const database = await testDatabase();
const { db } = database;
const env = { ...process.env, DATABASE_URL: database.url };

function dagent(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...CLI_COMPILED, ...argv], { env, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

const dir = mkdtempSync(path.join(tmpdir(), 'dagent-tenants-'));
const file = path.join(dir, 'work.yaml');
writeFileSync(file, 'name: work\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');

describe('dagent tenants', () => {
  it('creates a tenant with a weight, lists it with its share, and changes its weight', async () => {
    const made = await dagent('tenants', 'create', 'team-a', '--weight', '2', '--name', 'Team A', '--json');
    expect([made.code, made.stderr]).toEqual([0, '']);
    expect(JSON.parse(made.stdout)).toMatchObject({ id: 'team-a', name: 'Team A', weight: 2, ready: 0 });
    const set = await dagent('tenants', 'set', 'team-a', '--weight', '3');
    expect([set.code, set.stdout]).toEqual([0, 'tenant team-a (weight 3)\n']);
    const list = await dagent('tenants', 'list', '--json');
    const rows = JSON.parse(list.stdout) as Array<{ id: string; weight: number; weightShare: number }>;
    expect(rows.map((r) => [r.id, r.weight, r.weightShare])).toEqual([['default', 1, 0.25], ['team-a', 3, 0.75]]);
  });

  it('refuses a bad id, a taken one, a weight out of range and an unknown tenant, naming what, and changes nothing', async () => {
    const before = await databaseSnapshot(db);
    const bad = await dagent('tenants', 'create', 'Team A');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/id "Team A": must be a tenant id/);
    const taken = await dagent('tenants', 'create', 'default');
    expect(taken.code).toBe(1);
    expect(taken.stderr).toContain('tenant default exists already');
    const weight = await dagent('tenants', 'set', 'default', '--weight', '0');
    expect(weight.code).toBe(2);
    expect(weight.stderr).toContain('weight 0: must be more than 0');
    const unknown = await dagent('tenants', 'set', 'nobody', '--weight', '2');
    expect(unknown.code).toBe(4);
    expect(await databaseSnapshot(db)).toBe(before);
  });

  it('submit --tenant puts the DAG and its tasks in the tenant; an unknown tenant is refused and nothing is written', async () => {
    await dagent('tenants', 'create', 'team-s');
    const ok = await dagent('submit', file, '--tenant', 'team-s', '--json');
    expect(ok.code).toBe(0);
    const { dagId } = (JSON.parse(ok.stdout) as Array<{ dagId: string }>)[0]!;
    expect(await rowsOf(db, sql`select tenant_id from dags where id = ${dagId}`)).toEqual([{ tenant_id: 'team-s' }]);
    expect(await rowsOf(db, sql`select distinct tenant_id from tasks where dag_id = ${dagId}`)).toEqual([{ tenant_id: 'team-s' }]);
    const before = await databaseSnapshot(db);
    const refused = await dagent('submit', file, '--tenant', 'team-x');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('tenant "team-x" does not exist (an admin makes it: dagent tenants create team-x)');
    expect(await databaseSnapshot(db)).toBe(before);
  });

  it('sets and clears quotas; a bad quota is refused naming it; a submit past the queued quota exits 3 and writes nothing', async () => {
    await dagent('tenants', 'create', 'team-q', '--max-running', '3', '--max-queued', '2');
    const list = JSON.parse((await dagent('tenants', 'list', '--json')).stdout) as Array<{ id: string; maxRunning: number | null; maxQueued: number | null }>;
    expect(list.find((t) => t.id === 'team-q')).toMatchObject({ maxRunning: 3, maxQueued: 2 });
    const bad = await dagent('tenants', 'set', 'team-q', '--max-running', '0');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('max_running 0: must be at least 1, or none');
    expect((await dagent('submit', file, '--tenant', 'team-q')).code).toBe(0);
    const before = await databaseSnapshot(db);
    const full = await dagent('submit', file, '--tenant', 'team-q');
    expect(full.code).toBe(3);
    expect(full.stderr).toContain('tenant team-q at its quota: 2 tasks not finished and this submit adds more (max_queued 2)');
    expect(await databaseSnapshot(db)).toBe(before);
    const cleared = await dagent('tenants', 'set', 'team-q', '--max-queued', 'none', '--json');
    expect(JSON.parse(cleared.stdout)).toMatchObject({ maxRunning: 3, maxQueued: null });
    expect((await dagent('submit', file, '--tenant', 'team-q')).code).toBe(0);
  });

  it('stats --tenant counts that tenant\'s tasks only and lists its share; an unknown tenant exits 4', async () => {
    await dagent('tenants', 'create', 'team-t');
    expect((await dagent('submit', file, '--tenant', 'team-t')).code).toBe(0);
    const s = JSON.parse((await dagent('stats', '--tenant', 'team-t', '--json')).stdout) as { tenant: string; counts: Array<{ status: string; n: number }>; tenants: Array<{ id: string; ready: number }> };
    expect(s.tenant).toBe('team-t');
    expect(s.counts.reduce((n, c) => n + c.n, 0)).toBe(2);
    expect(s.tenants).toEqual([expect.objectContaining({ id: 'team-t', ready: 1 })]);
    const all = JSON.parse((await dagent('stats', '--json')).stdout) as { counts: Array<{ n: number }>; tenants: Array<{ id: string }> };
    expect(all.counts.reduce((n, c) => n + c.n, 0)).toBeGreaterThan(2);
    expect(all.tenants.map((t) => t.id)).toContain('team-t');
    const unknown = await dagent('stats', '--tenant', 'nobody');
    expect(unknown.code).toBe(4);
  });
});
