import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { CLI_COMPILED, cliWith } from '../helpers/cli.js';
import { dagSpec, databaseSnapshot, rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { schedulePause, scheduleRegister } from '../../src/engine/ops/cron.js';

const database = await testDatabase();
const { db } = database;
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
const rows = <T>(q: ReturnType<typeof sql>) => rowsOf<T>(db, q);

function file(name: string, text: string): string {
  const p = path.join(mkdtempSync(path.join(os.tmpdir(), 'dagent-cron-')), name);
  writeFileSync(p, text);
  return p;
}

describe('dagent cron', () => {
  it('submit registers a scheduled file; list, next, trigger, pause, resume and remove manage it', async () => {
    const f = file('hourly.yaml', 'name: hourly-report\ntasks:\n  build: { type: report }\nschedule:\n  cron: "0 * * * *"\n  overlap: skip\n');
    const submitted = await cli('submit', f);
    expect(submitted.code).toBe(0);
    expect(submitted.stdout).toMatch(/^scheduled hourly-report: next fire \d{4}-\d\d-\d\dT\d\d:00:00\.000Z\n$/);
    expect((await rows(sql`select id from dags`))).toHaveLength(0);

    const next = (await cli('cron', 'next', 'hourly-report', '-n', '3', '--json')).json() as string[];
    expect(next).toHaveLength(3);
    expect(new Date(next[1]!).getTime() - new Date(next[0]!).getTime()).toBe(3_600_000);

    const trigger = await cli('cron', 'trigger', 'hourly-report');
    expect(trigger.code).toBe(0);
    const dagId = trigger.stdout.trim();
    const [listed] = (await cli('cron', 'list', '--json')).json();
    expect(listed).toMatchObject({ name: 'hourly-report', cron: '0 * * * *', timezone: 'UTC', enabled: true, fires: 1, skipped: 0, missed: 0, lastDagId: dagId, lastRunStatus: 'running', overlap: 'skip' });
    const human = await cli('cron', 'list');
    expect(human.stdout).toMatch(new RegExp(`hourly-report\\s+default\\s+0 \\* \\* \\* \\*\\s+UTC\\s+yes\\s+\\S+\\s+running \\(${dagId}\\)`));

    expect((await cli('cron', 'pause', 'hourly-report')).code).toBe(0);
    expect((await cli('cron', 'list', '--json')).json()[0].enabled).toBe(false);
    expect((await cli('cron', 'resume', 'hourly-report')).stdout).toMatch(/resumed hourly-report: next fire/);
    expect((await cli('cron', 'remove', 'hourly-report')).code).toBe(0);
    expect((await cli('cron', 'list', '--json')).json()).toEqual([]);
    const [dag] = await rows<{ created_by: string }>(sql`select created_by from dags where id = ${dagId}`);
    expect(dag!.created_by).toBe('cron:hourly-report');
  });

  it('refuses bad input with exit 2 and writes nothing', async () => {
    const before = await databaseSnapshot(db);
    const plain = file('plain.yaml', 'name: plain\ntasks:\n  a: { type: t }\n');
    const noSchedule = await cli('cron', 'add', plain);
    expect(noSchedule.code).toBe(2);
    expect(noSchedule.stderr).toContain('no schedule: block');
    const badTz = file('tz.yaml', 'name: tz\ntasks:\n  a: { type: t }\nschedule:\n  cron: "@daily"\n  timezone: Mars/Olympus\n');
    const refused = await cli('cron', 'add', badTz);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/tz\.yaml:6:13 schedule\.timezone: unknown time zone "Mars\/Olympus"/);
    expect((await cli('cron', 'trigger', 'nope')).code).toBe(4); // not found
    const scheduled = file('p.yaml', 'name: p\nparams: { x: 1 }\ntasks:\n  a: { type: t }\nschedule:\n  cron: "@daily"\n');
    const withParam = await cli('submit', scheduled, '-p', 'x=2');
    expect(withParam.code).toBe(2);
    expect(withParam.stderr).toContain('--param is not stored with a schedule');
    expect(await databaseSnapshot(db)).toBe(before);
  });
});

describe('three scheduler processes', () => {
  it('an every-second schedule fires exactly once per second: no gaps, no duplicates', async () => {
    const yaml = 'name: every-second\ntasks:\n  tick: { type: t }\nschedule:\n  cron: "* * * * * *"\n  catchup: all\n  catchup_limit: 100\n';
    await scheduleRegister(db, await dagSpec(yaml), yaml);
    const procs = [0, 1, 2].map(() => {
      const child = spawn(process.execPath, [...CLI_COMPILED, 'up'], { env: { ...process.env, DATABASE_URL: database.url, DAGENT_HTTP_PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
      return { child, exited: new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code))) };
    });
    try {
      await eventually('12 fires', async () => (await rows<{ n: number }>(sql`select count(*)::int as n from dags where created_by = 'cron:every-second'`))[0]!.n >= 12, 40_000);
    } finally {
      await schedulePause(db, { tenant: 'default', name: 'every-second' });
      for (const p of procs) p.child.kill('SIGTERM');
      for (const p of procs) expect(await p.exited).toBe(0);
    }
    const fires = (await rows<{ s: number }>(sql`
      select extract(epoch from scheduled_at)::bigint as s from dags where created_by = 'cron:every-second' order by scheduled_at`)).map((r) => Number(r.s));
    const first10 = fires.slice(0, 10);
    expect(first10).toEqual(Array.from({ length: 10 }, (_, i) => first10[0]! + i));
    expect(new Set(fires).size).toBe(fires.length);
    expect(fires.at(-1)! - fires[0]! + 1).toBe(fires.length); // no gap anywhere
  });
});
