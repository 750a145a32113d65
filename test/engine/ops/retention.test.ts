import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { attemptLogAppend } from '../../../src/engine/read/attempt-logs.js';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { dagCancel } from '../../../src/engine/dag/cancel.js';
import { dlqCancel } from '../../../src/engine/ops/dlq.js';
import { taskFail } from '../../../src/engine/attempt/fail.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { dagRerunFailed, taskRerun } from '../../../src/engine/dag/rerun.js';
import { prune, prunePreview } from '../../../src/engine/ops/retention.js';
import { retentionDagsMark, retentionTasksDelete } from '../../../src/db/queries/retention.js';
import { dagLockGraph } from '../../../src/db/queries/dags.js';
import { withTx } from '../../../src/db/tx.js';
import { retentionLoopCreate } from '../../../src/maintenance/retention.js';
import { ConflictError } from '../../../src/errors.js';
import { cliWith } from '../../helpers/cli.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, chainYaml, dagCreate, databaseReset, databaseSnapshot, drain, rowsOf } from '../../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
const cli = cliWith({ ...process.env, DATABASE_URL: database.url, DAGENT_RETENTION: '' });
beforeEach(() => databaseReset(db));

const DAY = 86_400;
const MONTH = 30 * DAY;

/** Move a DAG's end (and its rows' own times) `days` into the past, as if it finished then. */
async function finishedDaysAgo(dagId: string, days: number): Promise<void> {
  await db.execute(sql`update dags set completed_at = now() - make_interval(days => ${days}), created_at = now() - make_interval(days => ${days + 1}) where id = ${dagId}`);
}

/** What the database holds for these DAGs, table by table. */
async function rowsFor(dagIds: string[]) {
  const ids = sql`${sql.param(dagIds)}::text[]`;
  const [r] = await rowsOf<Record<string, number>>(db, sql`select
    (select count(*)::int from dags where id = any(${ids})) as dags,
    (select count(*)::int from tasks where dag_id = any(${ids})) as tasks,
    (select count(*)::int from edges where dag_id = any(${ids})) as edges,
    (select count(*)::int from attempts where dag_id = any(${ids})) as attempts,
    (select count(*)::int from attempt_logs l where l.task_id in (select id from tasks where dag_id = any(${ids}))) as log_lines,
    (select count(*)::int from events where dag_id = any(${ids})) as events,
    (select count(*)::int from dead_letters where dag_id = any(${ids})) as dead_letters`);
  return r!;
}

/** Rows left behind by tasks that no longer exist: a prune must leave none. */
async function orphans() {
  const [r] = await rowsOf<Record<string, number>>(db, sql`select
    (select count(*)::int from attempt_logs where task_id not in (select id from tasks)) as log_lines,
    (select count(*)::int from attempt_log_stats where task_id not in (select id from tasks)) as log_stats,
    (select count(*)::int from attempts where task_id not in (select id from tasks)) as attempts,
    (select count(*)::int from events where task_id is not null and task_id not in (select id from tasks)) as task_events,
    (select count(*)::int from events where dag_id is not null and dag_id not in (select id from dags)) as dag_events,
    (select count(*)::int from dead_letters where dag_id not in (select id from dags)) as dead_letters`);
  return r!;
}
const NO_ORPHANS = { log_lines: 0, log_stats: 0, attempts: 0, task_events: 0, dag_events: 0, dead_letters: 0 };

/** A chain of three run to completion, with a failed attempt and logged lines on its first task. */
async function finishedChain(name: string): Promise<{ dagId: string }> {
  const dagId = await dagCreate(db, chainYaml(name, 3, 'max_attempts: 2\n    retry: { strategy: immediate }'));
  await agentCreate(db, 'w');
  const [t] = await taskClaim(db, 'w', { start: true });
  await attemptLogAppend(db, { taskId: t!.id, fence: t!.fence }, [{ message: 'first try' }, { level: 'warn', message: 'slow' }]);
  await taskFail(db, { taskId: t!.id, fence: t!.fence, errorClass: 'crash', message: 'boom' });
  expect(await drain(db, 'w')).toEqual(['t0', 't1', 't2']);
  return { dagId };
}

/** A DAG whose only task is dead-lettered (the DAG is blocked on it). */
async function deadLettered(name: string): Promise<{ dagId: string; letterId: string }> {
  const dagId = await dagCreate(db, `name: ${name}\ntasks:\n  only: { type: noop, max_attempts: 1 }\n`);
  await agentCreate(db, 'w');
  const [t] = await taskClaim(db, 'w', { start: true });
  await taskFail(db, { taskId: t!.id, fence: t!.fence, errorClass: 'crash', message: 'poison' });
  const [letter] = await rowsOf<{ id: string }>(db, sql`select id from dead_letters where task_id = ${t!.id}`);
  return { dagId, letterId: letter!.id };
}

describe('retention: what a prune deletes', () => {
  it('finished DAGs older than the period go with their tasks, edges, attempts, logs and events; younger, unfinished and dead-lettered ones stay', async () => {
    const old = await finishedChain('old');
    const cancelled = await dagCreate(db, chainYaml('cancelled', 2));
    await dagCancel(db, cancelled);
    const young = await finishedChain('young');
    const blocked = await deadLettered('blocked');
    const running = await dagCreate(db, chainYaml('running', 2));
    for (const id of [old.dagId, cancelled]) await finishedDaysAgo(id, 40);
    await finishedDaysAgo(young.dagId, 5);
    // Unfinished DAGs and open dead letters are kept however old they are.
    await db.execute(sql`update dags set created_at = now() - interval '90 days' where id in (${running}, ${blocked.dagId})`);
    await db.execute(sql`update dead_letters set created_at = now() - interval '90 days'`);

    const before = await rowsFor([old.dagId, cancelled]);
    expect(before).toMatchObject({ dags: 2, tasks: 5, edges: 3, attempts: 4, log_lines: 2 });
    expect(before.events).toBeGreaterThan(0);
    const keptBefore = await rowsFor([young.dagId, running, blocked.dagId]);

    // The dry run counts exactly what the prune then deletes, and changes nothing.
    const snapshot = await databaseSnapshot(db);
    const preview = await prunePreview(db, MONTH);
    expect(await databaseSnapshot(db)).toBe(snapshot);
    expect(preview).toMatchObject({ dags: 2, tasks: 5, attempts: 4, logLines: 2, events: before.events, deadLetters: 0, deadLettersKept: 1 });

    const done = await prune(db, { olderThanSec: MONTH });
    expect(done).toEqual({ dags: 2, tasks: 5, attempts: 4, logLines: 2, events: before.events, deadLetters: 0, agents: 0, deliveries: 0 });
    expect(await rowsFor([old.dagId, cancelled])).toEqual({ dags: 0, tasks: 0, edges: 0, attempts: 0, log_lines: 0, events: 0, dead_letters: 0 });
    expect(await orphans()).toEqual(NO_ORPHANS);
    expect(await rowsFor([young.dagId, running, blocked.dagId])).toEqual(keptBefore);
    // What went is on record, in an event of no DAG; a second prune finds nothing more, and records nothing.
    const record = async () => rowsOf<{ data: Record<string, unknown> }>(db, sql`select data from events where type = 'retention.pruned'`);
    expect((await record()).map((e) => e.data)).toEqual([{ ...done, olderThanSec: MONTH, by: 'api' }]);
    expect(await prune(db, { olderThanSec: MONTH })).toMatchObject({ dags: 0, tasks: 0 });
    expect(await record()).toHaveLength(1);
  });

  it('a dead letter keeps its DAG until a person resolves it; then the DAG and the resolved letter go', async () => {
    const { dagId, letterId } = await deadLettered('poisoned');
    await db.execute(sql`update dead_letters set created_at = now() - interval '40 days'`);
    expect(await prune(db, { olderThanSec: MONTH })).toMatchObject({ dags: 0 });
    await dlqCancel(db, letterId, { by: 'ops', note: 'not needed' });
    await finishedDaysAgo(dagId, 40);
    expect(await prune(db, { olderThanSec: MONTH })).toMatchObject({ dags: 1, tasks: 1, deadLetters: 1 });
    expect(await rowsFor([dagId])).toMatchObject({ dags: 0, dead_letters: 0 });
    expect(await orphans()).toEqual(NO_ORPHANS);
  });

  it('deletes in batches of the given size; a prune cut off after marking is finished by the next, and the DAG cannot be re-run meanwhile', async () => {
    const dagId = await dagCreate(db, chainYaml('long', 7));
    await agentCreate(db, 'w');
    await drain(db, 'w');
    await finishedDaysAgo(dagId, 40);
    expect(await retentionDagsMark(db, MONTH, 10)).toBe(1);
    expect((await retentionTasksDelete(db, 2)).tasks).toBe(2);
    expect(await rowsFor([dagId])).toMatchObject({ dags: 1, tasks: 5 });

    const [left] = await rowsOf<{ id: string }>(db, sql`select id from tasks where dag_id = ${dagId} order by key desc limit 1`);
    await expect(taskRerun(db, left!.id)).rejects.toThrow(ConflictError);
    await expect(taskRerun(db, left!.id)).rejects.toThrow(/being pruned/);
    await expect(dagRerunFailed(db, dagId)).rejects.toThrow(ConflictError);

    // A prune told to stop (the loop's time box, a shutdown) stops between two statements, and the next goes on.
    let asked = 0;
    const cut = await prune(db, { olderThanSec: MONTH, batchTasks: 2, goOn: () => ++asked <= 2 });
    expect(cut).toMatchObject({ dags: 0, tasks: 2 });
    expect(await rowsFor([dagId])).toMatchObject({ dags: 1, tasks: 3 });
    const progress: number[] = [];
    const done = await prune(db, { olderThanSec: MONTH, batchTasks: 2, onProgress: (c) => progress.push(c.tasks) });
    expect(done).toMatchObject({ dags: 1, tasks: 3, attempts: 3 });
    // 2 + 1: two statements, each within the batch.
    expect([...new Set(progress)]).toEqual([2, 3]);
    expect(await rowsFor([dagId])).toMatchObject({ dags: 0, tasks: 0, attempts: 0 });
    expect(await orphans()).toEqual(NO_ORPHANS);
  });

  it('a DAG a re-run holds is passed over, and a re-run that began first runs it', async () => {
    const dagId = await dagCreate(db, chainYaml('busy', 1));
    await agentCreate(db, 'w');
    await drain(db, 'w');
    await finishedDaysAgo(dagId, 40);
    const [task] = await rowsOf<{ id: string }>(db, sql`select id from tasks where dag_id = ${dagId}`);
    const other = new pg.Client({ connectionString: database.url });
    await other.connect();
    try {
      await other.query('begin');
      await other.query(`select pg_advisory_xact_lock(${0x646167}, hashtext($1))`, [dagId]);
      // The graph lock is held elsewhere (as a re-run holds it): the mark passes the DAG over rather than wait.
      expect(await retentionDagsMark(db, MONTH, 10)).toBe(0);
      await other.query('rollback');
    } finally {
      await other.end();
    }
    await withTx(db, async (tx) => {
      await dagLockGraph(tx, dagId);
      expect(await retentionDagsMark(db, MONTH, 10)).toBe(0);
    });
    const r = await taskRerun(db, task!.id);
    expect(r.reopened).toHaveLength(1);
    expect(await prune(db, { olderThanSec: MONTH })).toMatchObject({ dags: 0 });
  });

  it('a prune batch in progress never blocks a claim, nor a completion, of other work', async () => {
    const oldDag = await dagCreate(db, chainYaml('old', 3));
    await agentCreate(db, 'w');
    await drain(db, 'w');
    await finishedDaysAgo(oldDag, 40);
    await retentionDagsMark(db, MONTH, 10);
    const live = await dagCreate(db, chainYaml('live', 2));

    // The real batch statement, its transaction left open with its locks held, while the live DAG's work goes on.
    await withTx(db, async (tx) => {
      expect((await retentionTasksDelete(tx, 1000)).tasks).toBe(3);
      const hang = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the claim waited on the prune')), 20_000).unref());
      const [t] = await Promise.race([taskClaim(db, 'w'), hang]);
      expect(t!.dagId).toBe(live);
      await Promise.race([taskComplete(db, { taskId: t!.id, fence: t!.fence, output: {} }), hang]);
    });
    expect(await rowsFor([oldDag])).toMatchObject({ tasks: 0 });
    expect(await drain(db, 'w')).toEqual(['t1']);
  });
});

describe('retention: the rest of the history', () => {
  it('agents offline for longer than the period go, unless they hold a task or have a budget; active and recently seen ones stay', async () => {
    for (const id of ['gone', 'holding', 'quiet-but-active', 'recent']) await agentCreate(db, id);
    await agentCreate(db, 'budgeted', [], 25);
    const dagId = await dagCreate(db, chainYaml('held', 1));
    const [held] = await taskClaim(db, 'holding');
    expect(held!.dagId).toBe(dagId);
    await db.execute(sql`update agents set heartbeat_at = now() - interval '40 days', status = 'offline' where id in ('gone', 'holding', 'budgeted')`);
    await db.execute(sql`update agents set heartbeat_at = now() - interval '40 days' where id = 'quiet-but-active'`);
    await db.execute(sql`update agents set heartbeat_at = now() - interval '2 days', status = 'offline' where id = 'recent'`);
    expect((await prunePreview(db, MONTH)).agents).toBe(1);
    expect(await prune(db, { olderThanSec: MONTH })).toMatchObject({ agents: 1 });
    const left = await rowsOf<{ id: string }>(db, sql`select id from agents order by id`);
    // One with a budget keeps its row, so its spend still counts against it when it comes back.
    expect(left.map((a) => a.id)).toEqual(['budgeted', 'holding', 'quiet-but-active', 'recent']);
  });

  it('events of no DAG and finished webhook deliveries older than the period go; pending deliveries and recent rows stay', async () => {
    await db.execute(sql`insert into events (type, agent_id, at) values
      ('agent.registered', 'a', now() - interval '40 days'), ('agent.offline', 'a', now() - interval '31 days'), ('agent.registered', 'b', now())`);
    await db.execute(sql`insert into webhooks (id, url, events) values ('wh', 'http://hooks.example/x', '{dag.completed}')`);
    await db.execute(sql`insert into webhook_deliveries (webhook_id, event_id, event_type, payload, status, created_at) values
      ('wh', 1, 'dag.completed', '{}', 'delivered', now() - interval '40 days'),
      ('wh', 2, 'dag.completed', '{}', 'failed', now() - interval '40 days'),
      ('wh', 3, 'dag.completed', '{}', 'pending', now() - interval '40 days'),
      ('wh', 4, 'dag.completed', '{}', 'delivered', now())`);
    expect(await prune(db, { olderThanSec: MONTH, batchRows: 1 })).toMatchObject({ events: 2, deliveries: 2 });
    expect((await rowsOf<{ agent_id: string }>(db, sql`select agent_id from events where type <> 'retention.pruned'`)).map((e) => e.agent_id)).toEqual(['b']);
    const deliveries = await rowsOf<{ event_id: number }>(db, sql`select event_id from webhook_deliveries order by event_id`);
    expect(deliveries.map((d) => Number(d.event_id))).toEqual([3, 4]);
  });

  it('the retention loop prunes with the configured period, and does nothing when retention is off', async () => {
    const { dagId } = await finishedChain('loop');
    await finishedDaysAgo(dagId, 40);
    expect(await retentionLoopCreate({ db, retentionSec: null }).runOnce()).toBe(0);
    expect(await retentionLoopCreate({ db, retentionSec: 60 * DAY }).runOnce()).toBe(0);
    expect(await rowsFor([dagId])).toMatchObject({ dags: 1, tasks: 3 });
    expect(await retentionLoopCreate({ db, retentionSec: MONTH }).runOnce()).toBeGreaterThan(0);
    expect(await rowsFor([dagId])).toMatchObject({ dags: 0, tasks: 0, attempts: 0 });
  });
});

describe('dagent prune', () => {
  it('--dry-run counts and deletes nothing; without it, it deletes and says what', async () => {
    const { dagId } = await finishedChain('cli');
    await finishedDaysAgo(dagId, 40);
    const snapshot = await databaseSnapshot(db);
    const dry = await cli('prune', '--older-than', '30d', '--dry-run', '--json');
    expect(dry.code).toBe(0);
    expect(dry.json()).toMatchObject({ dry_run: true, older_than_sec: MONTH, would_delete: { dags: 1, tasks: 3, attempts: 4, log_lines: 2 }, dead_letters_kept: 0 });
    expect(await databaseSnapshot(db)).toBe(snapshot);
    const human = await cli('prune', '--older-than', '30d', '--dry-run');
    expect(human.stdout).toContain('would delete 1 DAG (3 tasks, 4 attempts, 2 log lines, 0 resolved dead letters)');

    // Not old enough for a 60-day period.
    expect((await cli('prune', '--older-than', '60d', '--json')).json().deleted).toMatchObject({ dags: 0 });
    const real = await cli('prune', '--older-than', '30d');
    expect(real.code).toBe(0);
    expect(real.stdout).toMatch(/^deleted 1 DAG \(3 tasks, 4 attempts, 2 log lines/);
    expect(await rowsFor([dagId])).toMatchObject({ dags: 0, tasks: 0 });
  });

  it('a period without a unit, or off, is refused with exit 2, naming the option or variable, and nothing changes', async () => {
    const { dagId } = await finishedChain('kept');
    await finishedDaysAgo(dagId, 40);
    const snapshot = await databaseSnapshot(db);
    const bare = await cli('prune', '--older-than', '30');
    expect([bare.code, bare.stderr]).toEqual([2, expect.stringContaining('--older-than: expected a period like 30d, 12h or 90m (a unit is required), or off; got "30"')]);
    const off = await cli('prune', '--older-than', 'off');
    expect([off.code, off.stderr]).toEqual([2, expect.stringContaining('--older-than: off prunes nothing')]);
    const env = cliWith({ ...process.env, DATABASE_URL: database.url, DAGENT_RETENTION: '5m' });
    const short = await env('prune', '--dry-run');
    expect([short.code, short.stderr]).toEqual([2, expect.stringContaining('environment DAGENT_RETENTION: a period of at least 1 hour(s), or off; got "5m"')]);
    const disabled = await cliWith({ ...process.env, DATABASE_URL: database.url, DAGENT_RETENTION: 'off' })('prune');
    expect([disabled.code, disabled.stderr]).toEqual([2, expect.stringContaining('DAGENT_RETENTION is off: give --older-than to prune anyway')]);
    expect(await databaseSnapshot(db)).toBe(snapshot);
    // With no option, DAGENT_RETENTION (else 30 days) is the period.
    expect((await cli('prune', '--dry-run', '--json')).json()).toMatchObject({ older_than_sec: MONTH, would_delete: { dags: 1 } });
  });
});
