import { readFileSync } from 'node:fs';
import { beforeEach, describe, expect, it } from 'vitest';
import { dagFileLoad } from '../../src/dag/load.js';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, databaseReset, dagSpec, drain, rowsOf } from '../helpers/factories.js';
import { scheduleFireDue, schedulePause, scheduleRegister, scheduleResume, scheduleTrigger } from '../../src/engine/ops/cron.js';
import { scheduleGet } from '../../src/db/queries/schedules.js';
import { schedulerCreate } from '../../src/maintenance/scheduler.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { dagCancel } from '../../src/engine/dag/cancel.js';
import { tenantCreate } from '../../src/engine/ops/tenants.js';
import { cliWith } from '../helpers/cli.js';

const database = await testDatabase();
const { db } = database;
const rows = <T>(q: ReturnType<typeof sql>) => rowsOf<T>(db, q);
beforeEach(() => databaseReset(db));

/** A clock the test moves by hand: the scheduler reads "now" from it instead of the database. */
function manualClock(start: string) {
  let now = new Date(start);
  return { clock: async () => now, set: (iso: string) => { now = new Date(iso); }, advance: (ms: number) => { now = new Date(now.getTime() + ms); } };
}

function scheduledYaml(name: string, schedule: string, extra = ''): string {
  return `name: ${name}\nparams:\n  scheduled_at: { default: "" }\ntasks:\n  work: { type: t, spec: { input: { for: "\${params.scheduled_at}" } } }\nschedule:\n${schedule}\n${extra}`;
}

async function register(yaml: string, clock: () => Promise<Date>) {
  return scheduleRegister(db, await dagSpec(yaml), yaml, clock);
}

async function firedAt(name: string): Promise<string[]> {
  const r = await rows<{ at: string }>(sql`select to_char(scheduled_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as at from dags where created_by = ${`cron:${name}`} order by scheduled_at`);
  return r.map((x) => x.at);
}

describe('scheduler', () => {
  it('fires once per instant: the DAG records cron:<name> and its scheduled time; a second tick at the same time adds nothing', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await register(scheduledYaml('tick', '  cron: "* * * * *"'), t.clock);
    expect((await scheduleGet(db, { tenant: 'default', name: 'tick' }))!.nextFireAt.toISOString()).toBe('2026-11-23T10:01:00.000Z');
    expect(await scheduleFireDue(db, { clock: t.clock })).toEqual([]);
    t.set('2026-11-23T10:01:00.400Z');
    const [report] = await scheduleFireDue(db, { clock: t.clock });
    expect(report!.fired).toHaveLength(1);
    expect(await scheduleFireDue(db, { clock: t.clock })).toEqual([]);
    const [dag] = await rows<{ created_by: string; idempotency_key: string; params: { scheduled_at: string } }>(sql`select created_by, idempotency_key, params from dags`);
    expect(dag).toEqual({ created_by: 'cron:tick', idempotency_key: 'cron:tick:2026-11-23T10:01:00.000Z', params: { scheduled_at: '2026-11-23T10:01:00.000Z' } });
    const [task] = await rows<{ spec: { input: { for: string } } }>(sql`select spec from tasks`);
    expect(task!.spec.input.for).toBe('2026-11-23T10:01:00.000Z');
    expect((await scheduleGet(db, { tenant: 'default', name: 'tick' }))).toMatchObject({ fires: 1, missed: 0, nextFireAt: new Date('2026-11-23T10:02:00Z') });
  });

  for (const [catchup, expected, missed] of [
    ['none', [], 5],
    ['latest', ['2026-11-23T10:05:00Z'], 4],
    ['all', ['2026-11-23T10:01:00Z', '2026-11-23T10:02:00Z', '2026-11-23T10:03:00Z', '2026-11-23T10:04:00Z', '2026-11-23T10:05:00Z'], 0],
  ] as const) {
    it(`downtime over 5 fire times with catchup ${catchup}: ${expected.length} run(s), ${missed} missed, then on schedule again`, async () => {
      const t = manualClock('2026-11-23T10:00:30Z');
      await register(scheduledYaml(`down-${catchup}`, `  cron: "* * * * *"\n  catchup: ${catchup}`), t.clock);
      t.set('2026-11-23T10:05:30Z'); // no scheduler ran over 10:01 … 10:05
      await scheduleFireDue(db, { clock: t.clock });
      expect(await firedAt(`down-${catchup}`)).toEqual(expected);
      expect(await scheduleGet(db, { tenant: 'default', name: `down-${catchup}` })).toMatchObject({ missed, nextFireAt: new Date('2026-11-23T10:06:00Z') });
      t.set('2026-11-23T10:06:01Z');
      await scheduleFireDue(db, { clock: t.clock });
      expect((await firedAt(`down-${catchup}`)).at(-1)).toBe('2026-11-23T10:06:00Z');
    });
  }

  it('catchup latest with ticks from 0.2 s to 2.5 s late fires every minute once, missing none', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await register(scheduledYaml('late-ticks', '  cron: "* * * * *"\n  catchup: latest'), t.clock);
    const lateness = [200, 1_000, 1_001, 1_200, 1_900, 2_500];
    for (const [i, ms] of lateness.entries()) {
      t.set(new Date(Date.parse('2026-11-23T10:01:00Z') + i * 60_000 + ms).toISOString());
      await scheduleFireDue(db, { clock: t.clock });
      // A second tick a moment later finds nothing more to do.
      t.advance(1_100);
      expect(await scheduleFireDue(db, { clock: t.clock })).toEqual([]);
    }
    expect(await firedAt('late-ticks')).toEqual(lateness.map((_, i) => new Date(Date.parse('2026-11-23T10:01:00Z') + i * 60_000).toISOString().replace('.000', '')));
    expect(await scheduleGet(db, { tenant: 'default', name: 'late-ticks' })).toMatchObject({ fires: 6, missed: 0 });
  });

  it('catchup all is bounded by catchup_limit: the newest fires run, the rest count as missed', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await register(scheduledYaml('bounded', '  cron: "* * * * *"\n  catchup: all\n  catchup_limit: 3'), t.clock);
    t.set('2026-11-23T10:05:30Z');
    await scheduleFireDue(db, { clock: t.clock });
    expect(await firedAt('bounded')).toEqual(['2026-11-23T10:03:00Z', '2026-11-23T10:04:00Z', '2026-11-23T10:05:00Z']);
    expect((await scheduleGet(db, { tenant: 'default', name: 'bounded' }))!.missed).toBe(2);
  });

  for (const [season, from, to, expected] of [
    ['spring forward (02:30 does not exist on 29 March: croner runs it at 03:30 CEST)', '2026-03-27T12:00:00Z', '2026-03-31T12:00:00Z',
      ['2026-03-28T01:30:00Z', '2026-03-29T01:30:00Z', '2026-03-30T00:30:00Z', '2026-03-31T00:30:00Z']],
    ['fall back (02:30 happens twice on 25 October: croner runs the first, CEST)', '2026-10-23T12:00:00Z', '2026-10-27T12:00:00Z',
      ['2026-10-24T00:30:00Z', '2026-10-25T00:30:00Z', '2026-10-26T01:30:00Z', '2026-10-27T01:30:00Z']],
  ] as const) {
    it(`DST, daily 02:30 Europe/Berlin across ${season}: once per day`, async () => {
      const t = manualClock(from);
      await register(scheduledYaml('berlin', '  cron: "30 2 * * *"\n  timezone: Europe/Berlin\n  catchup: none'), t.clock);
      // A scheduler ticking every 10 minutes of simulated time, so each fire is on time.
      for (let now = new Date(from).getTime(); now <= new Date(to).getTime(); now += 10 * 60_000) {
        t.set(new Date(now).toISOString());
        await scheduleFireDue(db, { clock: t.clock });
      }
      const fired = await firedAt('berlin');
      expect(fired).toEqual(expected);
      const days = fired.map((f) => new Date(f).toLocaleDateString('en-CA', { timeZone: 'Europe/Berlin' }));
      expect(new Set(days).size).toBe(fired.length);
      expect((await scheduleGet(db, { tenant: 'default', name: 'berlin' }))!.missed).toBe(0);
    });
  }

  it('names are per tenant: two tenants\' schedules of one name fire, pause and overlap apart, and the CLI names them with --tenant', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await tenantCreate(db, { id: 'a' });
    await tenantCreate(db, { id: 'b' });
    const yaml = scheduledYaml('tick', '  cron: "* * * * *"\n  overlap: skip');
    for (const tenant of ['a', 'b']) {
      // A scoped author of b registers a name a has: a schedule of its own, no refusal that would tell it a's exists.
      const row = await scheduleRegister(db, await dagSpec(yaml), yaml, t.clock, { createdBy: `submit:${tenant}`, replaceAny: false, tenant });
      expect([row.tenantId, row.name]).toEqual([tenant, 'tick']);
    }
    t.set('2026-11-23T10:01:01Z');
    expect((await scheduleFireDue(db, { clock: t.clock })).map((r) => r.fired.length)).toEqual([1, 1]);
    const runs = async () => (await rows<{ tenant_id: string; status: string }>(sql`
      select tenant_id, status from dags where created_by = 'cron:tick' order by tenant_id, scheduled_at`)).map((r) => `${r.tenant_id}:${r.status}`);
    expect(await runs()).toEqual(['a:running', 'b:running']);
    // Overlap is per tenant: b's run is over, a's goes on, so b fires and a skips.
    const [bRun] = await rows<{ id: string }>(sql`select id from dags where tenant_id = 'b'`);
    await dagCancel(db, bRun!.id, 'test');
    t.set('2026-11-23T10:02:01Z');
    await scheduleFireDue(db, { clock: t.clock });
    expect(await runs()).toEqual(['a:running', 'b:cancelled', 'b:running']);
    expect(await scheduleGet(db, { tenant: 'a', name: 'tick' })).toMatchObject({ fires: 1, skipped: 1 });
    expect(await scheduleGet(db, { tenant: 'b', name: 'tick' })).toMatchObject({ fires: 2, skipped: 0 });

    const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
    expect((await cli('cron', 'pause', 'tick', '--tenant', 'a')).stdout).toBe('paused tick (tenant a)\n');
    expect(await scheduleGet(db, { tenant: 'a', name: 'tick' })).toMatchObject({ enabled: false });
    expect(await scheduleGet(db, { tenant: 'b', name: 'tick' })).toMatchObject({ enabled: true });
    const list = (await cli('cron', 'list', '--json')).json() as Array<{ tenantId: string; name: string; enabled: boolean }>;
    expect(list.map((r) => [r.tenantId, r.name, r.enabled])).toEqual([['a', 'tick', false], ['b', 'tick', true]]);
    const none = await cli('cron', 'pause', 'tick');
    expect([none.code, none.stderr]).toEqual([4, 'error: schedule tick not found\n']);
    const elsewhere = await cli('cron', 'trigger', 'tick', '--tenant', 'nope');
    expect([elsewhere.code, elsewhere.stderr]).toEqual([4, 'error: schedule tick (tenant nope) not found\n']);
  });

  it('a fire into a tenant at its queued quota is skipped with the reason, and the schedules behind it fire in the same tick', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await tenantCreate(db, { id: 'small', maxQueued: 1 });
    const two = 'name: full\ntasks:\n  a: { type: t }\n  b: { type: t }\nschedule:\n  cron: "* * * * *"\n';
    await scheduleRegister(db, await dagSpec(two), two, t.clock, { createdBy: 'cli', replaceAny: true, tenant: 'small' });
    t.set('2026-11-23T10:00:45Z');
    await register(scheduledYaml('later', '  cron: "* * * * *"'), t.clock);
    t.set('2026-11-23T10:01:01Z');
    const reports = await scheduleFireDue(db, { clock: t.clock });
    expect(reports.map((r) => [r.schedule, r.fired.length, r.skipped.length])).toEqual([['full', 0, 1], ['later', 1, 0]]);
    const [skip] = await rows<{ reason: string }>(sql`select data->>'reason' as reason from events where type = 'schedule.skipped'`);
    expect(skip!.reason).toMatch(/^tenant small at its quota: 0 tasks not finished and this submit adds more \(max_queued 1\)/);
    expect(await scheduleGet(db, { tenant: 'small', name: 'full' })).toMatchObject({ fires: 0, skipped: 1, nextFireAt: new Date('2026-11-23T10:02:00Z') });
  });

  it('overlap skip: a fire while the previous run is still going is recorded as skipped', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await register(scheduledYaml('skipper', '  cron: "* * * * *"\n  overlap: skip'), t.clock);
    t.set('2026-11-23T10:01:01Z');
    await scheduleFireDue(db, { clock: t.clock });
    t.set('2026-11-23T10:02:01Z');
    const [r] = await scheduleFireDue(db, { clock: t.clock });
    expect(r!.skipped.map((d) => d.toISOString())).toEqual(['2026-11-23T10:02:00.000Z']);
    expect(await firedAt('skipper')).toEqual(['2026-11-23T10:01:00Z']);
    await drain(db, await agentCreate(db, 'finisher'));
    t.set('2026-11-23T10:03:01Z');
    await scheduleFireDue(db, { clock: t.clock });
    expect(await firedAt('skipper')).toEqual(['2026-11-23T10:01:00Z', '2026-11-23T10:03:00Z']);
    expect(await scheduleGet(db, { tenant: 'default', name: 'skipper' })).toMatchObject({ fires: 2, skipped: 1 });
    const [e] = await rows<{ n: number }>(sql`select count(*)::int as n from events where type = 'schedule.skipped'`);
    expect(e!.n).toBe(1);
  });

  it('overlap cancel_previous: the previous run is cancelled and the new one created', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await register(scheduledYaml('replacer', '  cron: "* * * * *"\n  overlap: cancel_previous'), t.clock);
    t.set('2026-11-23T10:01:01Z');
    await scheduleFireDue(db, { clock: t.clock });
    t.set('2026-11-23T10:02:01Z');
    await scheduleFireDue(db, { clock: t.clock });
    const dags = await rows<{ status: string; at: Date }>(sql`select status, scheduled_at as at from dags order by scheduled_at`);
    expect(dags.map((d) => d.status)).toEqual(['cancelled', 'running']);
  });

  it('a manual trigger creates a run now without moving the schedule', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await register(scheduledYaml('manual', '  cron: "0 9 * * MON"'), t.clock);
    const before = (await scheduleGet(db, { tenant: 'default', name: 'manual' }))!.nextFireAt;
    const r = await scheduleTrigger(db, { tenant: 'default', name: 'manual' }, t.clock);
    const [dag] = await rows<{ id: string; created_by: string }>(sql`select id, created_by from dags`);
    expect(dag).toEqual({ id: r.dagId, created_by: 'cron:manual' });
    expect((await scheduleGet(db, { tenant: 'default', name: 'manual' }))!.nextFireAt).toEqual(before);
  });

  it('two schedulers ticking at once over the same due fires create each DAG once', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await register(scheduledYaml('race', '  cron: "* * * * *"\n  catchup: all'), t.clock);
    t.set('2026-11-23T10:05:30Z');
    const a = schedulerCreate({ db, clock: t.clock });
    const b = schedulerCreate({ db, clock: t.clock });
    await Promise.all([a.runOnce(), b.runOnce(), a.runOnce(), b.runOnce()]);
    expect(await firedAt('race')).toHaveLength(5);
  });

  it('the scheduled DAG shipped in dags/schedules registers, and a fire fills in scheduled_at', async () => {
    const file = 'dags/schedules/nightly-dependency-check.yaml';
    const source = readFileSync(file, 'utf8');
    const t = manualClock('2026-11-23T10:00:00Z');
    const row = await scheduleRegister(db, await dagFileLoad(file), source, t.clock);
    expect(row).toMatchObject({ name: 'nightly-dependency-check', timezone: 'Europe/Berlin', nextFireAt: new Date('2026-11-24T02:00:00Z') });
    t.set('2026-11-24T02:00:01Z');
    await scheduleFireDue(db, { clock: t.clock });
    const [task] = await rows<{ spec: { prompt: string } }>(sql`select spec from tasks where key = 'report'`);
    expect(task!.spec.prompt).toBe('Outdated dependencies as of 2026-11-24T02:00:00.000Z.');
  });

  it('a schedule whose DAG can no longer be built is recorded and moved on, without holding up the others', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await register(scheduledYaml('broken', '  cron: "* * * * *"'), t.clock);
    await register(scheduledYaml('healthy', '  cron: "* * * * *"'), t.clock);
    await db.execute(sql`update schedules set source = 'name: [' where name = 'broken'`);
    t.set('2026-11-23T10:01:01Z');
    await scheduleFireDue(db, { clock: t.clock });
    expect(await firedAt('healthy')).toEqual(['2026-11-23T10:01:00Z']);
    expect(await firedAt('broken')).toEqual([]);
    expect(await scheduleGet(db, { tenant: 'default', name: 'broken' })).toMatchObject({ missed: 1, nextFireAt: new Date('2026-11-23T10:02:00Z') });
    const [e] = await rows<{ data: { name: string; error: string } }>(sql`select data from events where type = 'schedule.fire_failed'`);
    expect(e!.data.name).toBe('broken');
    expect(e!.data.error).toMatch(/inline.yaml:1:7 invalid YAML/);
  });

  it('a fire already made is neither repeated, counted again, nor treated as an overlapping run (a rewound schedule)', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await register(scheduledYaml('rewound', '  cron: "* * * * *"\n  overlap: cancel_previous'), t.clock);
    t.set('2026-11-23T10:01:01Z');
    await scheduleFireDue(db, { clock: t.clock });
    // As a registration that raced the fire would have left it: next_fire_at back on the instant that fired.
    await db.execute(sql`update schedules set next_fire_at = '2026-11-23T10:01:00Z' where name = 'rewound'`);
    t.set('2026-11-23T10:01:30Z');
    await scheduleFireDue(db, { clock: t.clock });
    const dags = await rows<{ status: string }>(sql`select status from dags`);
    expect(dags).toEqual([{ status: 'running' }]);
    expect(await scheduleGet(db, { tenant: 'default', name: 'rewound' })).toMatchObject({ fires: 1, skipped: 0, nextFireAt: new Date('2026-11-23T10:02:00Z') });
  });

  it('catchup none still runs a fire that is only slightly late (within the grace)', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await register(scheduledYaml('punctual', '  cron: "* * * * *"\n  catchup: none'), t.clock);
    t.set('2026-11-23T10:01:04Z');
    await scheduleFireDue(db, { clock: t.clock });
    expect(await firedAt('punctual')).toEqual(['2026-11-23T10:01:00Z']);
  });

  it('after an 8-day outage, catchup latest runs the newest fire, not the oldest', async () => {
    const t = manualClock('2026-11-01T00:00:30Z');
    await register(scheduledYaml('long-gone', '  cron: "* * * * *"'), t.clock);
    t.set('2026-11-09T00:00:30Z');
    const [r] = await scheduleFireDue(db, { clock: t.clock });
    expect(await firedAt('long-gone')).toEqual(['2026-11-09T00:00:00Z']);
    expect(r!.missed).toBeGreaterThanOrEqual(999);
    expect(r!.next.toISOString()).toBe('2026-11-09T00:01:00.000Z');
  });

  it('pause stops fires; resume continues from the next instant without catching up the pause', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await register(scheduledYaml('napping', '  cron: "* * * * *"\n  catchup: all'), t.clock);
    await schedulePause(db, { tenant: 'default', name: 'napping' });
    t.set('2026-11-23T10:05:30Z');
    await scheduleFireDue(db, { clock: t.clock });
    expect(await firedAt('napping')).toEqual([]);
    await scheduleResume(db, { tenant: 'default', name: 'napping' }, t.clock);
    t.set('2026-11-23T10:06:01Z');
    await scheduleFireDue(db, { clock: t.clock });
    expect(await firedAt('napping')).toEqual(['2026-11-23T10:06:00Z']);
  });

  it('refuses a scheduled DAG whose task idempotency key would be the same at every fire', async () => {
    const yaml = 'name: fixed-key\ntasks:\n  a: { type: t, idempotency_key: nightly }\nschedule:\n  cron: "@daily"\n';
    await expect(register(yaml, manualClock('2026-11-23T10:00:00Z').clock)).rejects.toThrow(/task a has the same idempotency_key at every fire/);
    const ok = 'name: fire-key\nparams: { scheduled_at: "" }\ntasks:\n  a: { type: t, idempotency_key: "nightly-${params.scheduled_at}" }\nschedule:\n  cron: "@daily"\n';
    await expect(register(ok, manualClock('2026-11-23T10:00:00Z').clock)).resolves.toMatchObject({ name: 'fire-key' });
  });

  it('a full queue skips fires (the submit backpressure limit), and firing resumes once it drains', async () => {
    const t = manualClock('2026-11-23T10:00:30Z');
    await register(scheduledYaml('busy', '  cron: "* * * * *"'), t.clock);
    const many = Array.from({ length: 3 }, (_, i) => `  t${i}: { type: q }`).join('\n');
    await dagSubmit(db, [await dagSpec(`name: backlog\ntasks:\n${many}\n`)]);
    t.set('2026-11-23T10:01:00.200Z');
    const [report] = await scheduleFireDue(db, { clock: t.clock, maxQueued: 3 });
    expect(report).toMatchObject({ fired: [], skipped: [new Date('2026-11-23T10:01:00Z')] });
    expect(await firedAt('busy')).toEqual([]);
    const [event] = await rows<{ data: { reason: string } }>(sql`select data from events where type = 'schedule.skipped'`);
    expect(event!.data.reason).toBe('queue full (3 ready or pending tasks, limit 3)');
    expect(await scheduleGet(db, { tenant: 'default', name: 'busy' })).toMatchObject({ skipped: 1, nextFireAt: new Date('2026-11-23T10:02:00Z') });

    await db.execute(sql`update tasks set status = 'cancelled' where status in ('ready', 'pending')`);
    t.set('2026-11-23T10:02:00.200Z');
    await scheduleFireDue(db, { clock: t.clock, maxQueued: 3 });
    expect(await firedAt('busy')).toEqual(['2026-11-23T10:02:00Z']);
  });
});
