import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { leash } from '../helpers/child-leash.js';
import { CLI_COMPILED } from '../helpers/cli.js';
import { agentCreate, dagCreate, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { attemptLogAppend } from '../../src/engine/read/attempt-logs.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { taskRerun } from '../../src/engine/dag/rerun.js';
import { ConflictError } from '../../src/errors.js';

const database = await testDatabase();
const { db } = database;

const HISTORY_DAGS = 30;
const TASKS_PER_DAG = 1000;

/** Rows left behind by tasks or DAGs that no longer exist. */
async function orphans() {
  const [r] = await rowsOf<Record<string, number>>(db, sql`select
    (select count(*)::int from attempts where task_id not in (select id from tasks)) as attempts,
    (select count(*)::int from attempt_log_stats where task_id not in (select id from tasks)) as log_stats,
    (select count(*)::int from attempt_logs where task_id not in (select id from tasks)) as log_lines,
    (select count(*)::int from events where task_id is not null and task_id not in (select id from tasks)) as task_events,
    (select count(*)::int from tasks where dag_id not in (select id from dags)) as tasks`);
  return r!;
}

const historyTasks = async () => (await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from tasks where dag_id like 'dag_hist%'`))[0]!.n;

describe('a prune killed halfway (kill -9)', () => {
  it('leaves whole tasks and marked DAGs, refuses re-runs of them, and the next prune finishes them; live work is untouched', async () => {
    // One finished task with an attempt and two log lines, copied 30,000 times into 30 old DAGs (the history).
    const seedDag = await dagCreate(db, 'name: seed\ntasks:\n  only: { type: t }\n');
    await agentCreate(db, 'w');
    const [seed] = await taskClaim(db, 'w', { start: true, dagId: seedDag });
    await attemptLogAppend(db, { taskId: seed!.id, fence: seed!.fence }, [{ message: 'reading' }, { message: 'writing' }]);
    await taskComplete(db, { taskId: seed!.id, fence: seed!.fence, output: { ok: true } });
    await db.execute(sql`
      insert into dags select r.*
      from dags d, generate_series(1, ${HISTORY_DAGS}::int) g, lateral jsonb_populate_record(null::dags, to_jsonb(d) || jsonb_build_object(
        'id', 'dag_hist' || lpad(g::text, 10, '0'), 'name', 'history-' || g, 'idempotency_key', null,
        'completed_at', now() - interval '40 days', 'tasks_total', ${TASKS_PER_DAG}::int)) r
      where d.id = ${seedDag}`);
    await db.execute(sql`
      with copies as (
        select t, 'dag_hist' || lpad(g::text, 10, '0') as dag_id, 'tsk_hist' || lpad((g * 100000 + i)::text, 10, '0') as id, 'k' || i as key
        from tasks t, generate_series(1, ${HISTORY_DAGS}::int) g, generate_series(1, ${TASKS_PER_DAG}::int) i where t.id = ${seed!.id}
      ), tasks_in as (
        -- Through LATERAL: (f(x)).* would call f once per column.
        insert into tasks select r.* from copies c, lateral jsonb_populate_record(null::tasks, to_jsonb(c.t) || jsonb_build_object('id', c.id, 'dag_id', c.dag_id, 'key', c.key)) r
        returning id, dag_id
      ), attempts_in as (
        insert into attempts select r.*
        from tasks_in x, attempts a, lateral jsonb_populate_record(null::attempts, to_jsonb(a) || jsonb_build_object('task_id', x.id, 'dag_id', x.dag_id)) r
        where a.task_id = ${seed!.id}
      ), stats_in as (
        insert into attempt_log_stats (task_id, fence, attempt, lines, bytes, dropped)
        select x.id, s.fence, s.attempt, s.lines, s.bytes, s.dropped from tasks_in x, attempt_log_stats s where s.task_id = ${seed!.id}
      )
      insert into attempt_logs (task_id, fence, level, message, fields, at)
      select x.id, l.fence, l.level, l.message, l.fields, l.at from tasks_in x, attempt_logs l where l.task_id = ${seed!.id}`);
    const total = HISTORY_DAGS * TASKS_PER_DAG;
    expect(await historyTasks()).toBe(total);
    // Work running now, beside the history.
    const live = await dagCreate(db, 'name: live\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');

    const prune = () => leash(spawn(process.execPath, [...CLI_COMPILED, 'prune', '--older-than', '30d'], {
      env: { ...process.env, DATABASE_URL: database.url }, stdio: ['ignore', 'pipe', 'pipe'],
    }));
    const child = prune();
    let out = '';
    child.stdout.on('data', (b) => (out += b));
    child.stderr.on('data', (b) => (out += b));
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    // Killed as soon as a first batch of tasks is gone, in the middle of the prune.
    let left = total;
    for (let i = 0; i < 3000 && child.exitCode === null; i++) {
      left = await historyTasks();
      if (left < total) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(child.exitCode, `the prune ended before it could be killed: ${out}`).toBeNull();
    child.kill('SIGKILL');
    await exited;
    // The statement the killed process had sent runs to its end on the server (PostgreSQL does not cancel it when the
    // client vanishes) and commits whole; wait for its backend to go before counting what is left.
    for (let i = 0; i < 600; i++) {
      const [busy] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend' and state <> 'idle'`);
      if (busy!.n === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }

    const afterKill = await historyTasks();
    expect(afterKill).toBeGreaterThan(0);
    expect(afterKill).toBeLessThan(total);
    // Every statement is its own transaction: what went, went whole, with what hangs off it.
    expect(await orphans()).toEqual({ attempts: 0, log_stats: 0, log_lines: 0, task_events: 0, tasks: 0 });
    const marked = await rowsOf<{ id: string }>(db, sql`select id from dags where pruned_at is not null`);
    expect(marked.length).toBeGreaterThan(0);
    // A task of a DAG the killed prune had begun (all 30 were marked in its first pass) does not run again.
    const [stillThere] = await rowsOf<{ id: string }>(db, sql`select t.id from tasks t join dags d on d.id = t.dag_id where d.pruned_at is not null limit 1`);
    await expect(taskRerun(db, stillThere!.id)).rejects.toThrow(ConflictError);
    expect(await taskStatusByKey(db, live)).toEqual({ a: 'ready', b: 'pending' });

    // The next prune finishes what the killed one began, and the rest.
    const again = spawnSync(process.execPath, [...CLI_COMPILED, 'prune', '--older-than', '30d', '--json'], {
      env: { ...process.env, DATABASE_URL: database.url }, encoding: 'utf8', timeout: 120_000,
    });
    expect(again.status, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout).deleted.tasks).toBe(afterKill);
    expect(await historyTasks()).toBe(0);
    expect((await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from dags where id like 'dag_hist%'`))[0]!.n).toBe(0);
    expect(await orphans()).toEqual({ attempts: 0, log_stats: 0, log_lines: 0, task_events: 0, tasks: 0 });
    expect(await taskStatusByKey(db, live)).toEqual({ a: 'ready', b: 'pending' });
  });
});
