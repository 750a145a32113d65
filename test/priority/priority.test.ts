import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { cliWith } from '../helpers/cli.js';
import { agentCreate, dagCreate, databaseReset, rowsOf } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { dagEdgesAdd } from '../../src/engine/dag/edges.js';
import { effectivePriority, overtakeMinutes, priorityConstants } from '../../src/model/priority.js';
import { priorityRefresherCreate } from '../../src/maintenance/priority-refresher.js';

const database = await testDatabase();
const { db } = database;
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
beforeEach(() => databaseReset(db));

const keyOf = async (agentId: string) => (await taskClaim(db, agentId))[0]?.key;

describe('effective priority', () => {
  it('starvation: a steady stream of priority-10 tasks does not hold a priority-90 task past its computed bound (simulated clock)', async () => {
    await agentCreate(db, 'steady');
    const t0 = Date.now();
    let simNow = new Date(t0);
    const refresher = priorityRefresherCreate({ db, tolerance: 0, now: () => simNow });
    await dagCreate(db, 'name: background\ntasks:\n  sweep: { type: t, priority: 90, boost_per_minute: 0.1 }\n');
    await db.execute(sql`update tasks set ready_at = ${simNow.toISOString()}::timestamptz`);
    // Fresh priority-10 work arrives every 10 simulated minutes; the agent takes one task per arrival.
    const stepMin = 10;
    const bound = overtakeMinutes(90, 10, 0.1); // 800 minutes: when 90 − 0.1 × age drops below a fresh 10
    let claimedAt: number | undefined;
    for (let minute = stepMin; minute <= bound + 5 * stepMin && claimedAt === undefined; minute += stepMin) {
      simNow = new Date(t0 + minute * 60_000);
      const dagId = await dagCreate(db, `name: urgent\ntasks:\n  fix: { type: t, priority: 10, boost_per_minute: 0.1 }\n`);
      await db.execute(sql`update tasks set ready_at = ${simNow.toISOString()}::timestamptz where dag_id = ${dagId}`);
      await refresher.runOnce();
      const [t] = await taskClaim(db, 'steady');
      if (t!.key === 'sweep') claimedAt = minute;
      await taskComplete(db, { taskId: t!.id, fence: t!.fence, output: null });
    }
    expect(claimedAt).toBeDefined();
    // Not before the bound (priority mattered all along), and within one arrival of it.
    expect(claimedAt!).toBeGreaterThan(bound - stepMin);
    expect(claimedAt!).toBeLessThanOrEqual(bound + stepMin);
  });

  it('deadline: of two equal tasks the nearer deadline is claimed first; a deadline that cannot be met is flagged, and the task still runs', async () => {
    await agentCreate(db, 'dl');
    await dagCreate(db, `
name: deadlines
tasks:
  later: { type: t, deadline: 2h }
  sooner: { type: t, deadline: 30m }
  none: { type: t }
  missed: { type: t, priority: 90, deadline: "2020-01-01T00:00:00Z" }
  tight: { type: t, priority: 90, deadline: 30s, estimate: 5m }
`);
    await priorityRefresherCreate({ db }).runOnce();
    const flagged = await rowsOf<{ key: string }>(db, sql`select key from tasks where deadline_missed order by key`);
    expect(flagged.map((r) => r.key)).toEqual(['missed', 'tight']);
    const events = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from events where type = 'task.deadline_missed'`);
    expect(events[0]!.n).toBe(2);
    const order: string[] = [];
    for (let k = await keyOf('dl'); k; k = await keyOf('dl')) order.push(k);
    // missed: 90 − 40 (deadline passed) = 50 − age; sooner: 50 − 40·e^(−0.5) ≈ 25.7; later: 50 − 40·e^(−2) ≈ 44.6.
    expect(order.indexOf('sooner')).toBeLessThan(order.indexOf('later'));
    expect(order.indexOf('later')).toBeLessThan(order.indexOf('none'));
    expect(order).toContain('missed');
    const listed = await cli('tasks', '--status', 'claimed');
    expect(listed.stdout).toMatch(/missed\s+claimed\s+90\s+.*deadline missed/);
  });

  it('critical path: with one long chain and many short branches, the chain\'s head is claimed first', async () => {
    const chain = Array.from({ length: 10 }, (_, i) => `  c${i}: { type: t${i > 0 ? `, depends_on: [c${i - 1}]` : ''} }`);
    const shorts = Array.from({ length: 20 }, (_, i) => `  s${i}: { type: t }`);
    // Shorts first in the file and in creation order: FIFO would pick one of them.
    await dagCreate(db, `name: paths\ntasks:\n${[...shorts, ...chain].join('\n')}\n`);
    await agentCreate(db, 'cp');
    expect(await keyOf('cp')).toBe('c0');
    const [head] = await rowsOf<{ rank: number }>(db, sql`select cp_rank_sec as rank from tasks where key = 'c0'`);
    expect(head!.rank).toBe(10 * priorityConstants().defaultEstimateSec);
  });

  it('re-ranks when the graph changes: a short task made upstream of the long chain goes first', async () => {
    await dagCreate(db, `
name: rerank
tasks:
  a: { type: t, estimate: 10m }
  b: { type: t, estimate: 10m, depends_on: [a] }
  c: { type: t, estimate: 10m, depends_on: [b] }
  lone: { type: t, estimate: 1m }
  other: { type: t, estimate: 2m }
`);
    const dagId = (await rowsOf<{ dag_id: string }>(db, sql`select dag_id from tasks limit 1`))[0]!.dag_id;
    await dagEdgesAdd(db, dagId, [{ upstream: 'lone', downstream: 'a' }]);
    const ranks = await rowsOf<{ key: string; rank: number }>(db, sql`select key, cp_rank_sec as rank from tasks order by key`);
    expect(Object.fromEntries(ranks.map((r) => [r.key, r.rank]))).toEqual({ a: 1800, b: 1200, c: 600, lone: 1860, other: 120 });
    await agentCreate(db, 'rr');
    expect(await keyOf('rr')).toBe('lone');
  });

  it('stores what the formula computes, and a human override re-ranks at once', async () => {
    const dagId = await dagCreate(db, 'name: human\ntasks:\n  x: { type: t, priority: 70, estimate: 30m }\n  y: { type: t, priority: 40 }\n');
    const [x] = await rowsOf<{ id: string; effective: number }>(db, sql`select id, effective_priority as effective from tasks where key = 'x'`);
    expect(x!.effective).toBeCloseTo(effectivePriority({ priority: 70, boostPerMinute: 0.1, readySec: 0, deadlineInSec: null, cpRankSec: 1800 }), 6);
    const r = await cli('priority', x!.id, '5');
    expect(r.code).toBe(0);
    await agentCreate(db, 'hu');
    expect(await keyOf('hu')).toBe('x');
    expect((await cli('priority', dagId, '101')).code).toBe(2);
    const bad = await cli('priority', 'tsk_nope', '3');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('tsk_nope');
  });
});
