/**
 * Retention's figures for `npm run bench`: what finished work costs on disk, per task, and what a prune of it
 * costs the claim. `tasks` no-op tasks in DAGs of 1,000 (chains of 10, so edges too) are run to completion by
 * the bench's agent loop; then they are made 40 days old and pruned in RETENTION_DEFAULTS batches while a
 * claimer takes READY tasks from a live DAG beside them, timed like the claim-latency figure. Tasks that log cost
 * more: what one kept log line takes is measured apart (the bench's tasks log nothing).
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import type { Database } from '../../src/db/handle.js';
import type { TaskSpec } from '../../src/dag/spec.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { prune } from '../../src/engine/ops/retention.js';
import { textArray } from '../../src/db/statement.js';

export interface RetentionBenchHelpers {
  task: (key: string, dependsOn?: string[]) => TaskSpec;
  runAgent: (d: Database, slots: number, expected: number) => Promise<{ seconds: number; tasks: number }>;
  analyze: (d: Database) => Promise<void>;
}

export interface RetentionFigures {
  bytesPerTask: number;
  /** One kept log line of LOG_SAMPLE_CHARS characters with a small `fields` object, its stats row shared by its attempt's lines. */
  bytesPerLogLine: number;
  pruneSeconds: number;
  claimsDuring: number[];
  claimsIdle: number[];
}

/** dagent's tables with their indexes and TOAST, in bytes. */
async function tableBytes(d: Database): Promise<number> {
  const { rows } = await d.db.execute(sql`
    select coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint as bytes from pg_class c
    where c.relnamespace = current_schema()::regnamespace and c.relkind = 'r'`);
  return Number((rows[0] as { bytes: string }).bytes);
}

/** The log lines of the disk figure: 20 per attempt, each a message of this many characters and a two-field object. */
const LOG_SAMPLE_CHARS = 120;
const LOG_SAMPLE_LINES = 20;

/** Disk per log line: `attempts` attempts' worth written as the log append writes them, measured, and deleted. */
async function logLineBytes(d: Database, attempts: number): Promise<number> {
  await d.db.execute(sql`vacuum full attempt_logs`);
  await d.db.execute(sql`vacuum full attempt_log_stats`);
  const before = await tableBytes(d);
  await d.db.execute(sql`
    insert into attempt_logs (task_id, fence, level, message, fields, at)
    select 'bench-log-' || a, 1, 'info', left(repeat(md5(a::text || ':' || l::text), 4), ${LOG_SAMPLE_CHARS}),
           jsonb_build_object('file', 'src/module-' || l || '.ts', 'ms', l * 7), now()
    from generate_series(1, ${attempts}) a, generate_series(1, ${LOG_SAMPLE_LINES}) l`);
  await d.db.execute(sql`
    insert into attempt_log_stats (task_id, fence, attempt, lines, bytes)
    select 'bench-log-' || a, 1, 1, ${LOG_SAMPLE_LINES}, ${LOG_SAMPLE_LINES * LOG_SAMPLE_CHARS} from generate_series(1, ${attempts}) a`);
  await d.db.execute(sql`vacuum analyze attempt_logs`);
  const bytes = ((await tableBytes(d)) - before) / (attempts * LOG_SAMPLE_LINES);
  await d.db.execute(sql`delete from attempt_logs where task_id like 'bench-log-%'`);
  await d.db.execute(sql`delete from attempt_log_stats where task_id like 'bench-log-%'`);
  return bytes;
}

export async function retentionBench(d: Database, tasks: number, h: RetentionBenchHelpers): Promise<RetentionFigures> {
  const bytesPerLogLine = await logLineBytes(d, Math.max(1_000, tasks / 10));
  const perDag = 1000;
  const chainLength = 10;
  await d.db.execute(sql`vacuum full`);
  const before = await tableBytes(d);
  for (let i = 0; i < tasks / perDag; i++) {
    const specs = Array.from({ length: perDag }, (_, j) => {
      const [c, n] = [Math.floor(j / chainLength), j % chainLength];
      return h.task(`c${c}-${n}`, n ? [`c${c}-${n - 1}`] : []);
    });
    await dagSubmit(d.db, [{ name: `history-${i}`, params: {}, tasks: specs }]);
  }
  await h.analyze(d);
  await h.runAgent(d, 32, tasks);
  await d.db.execute(sql`vacuum analyze`);
  const bytesPerTask = ((await tableBytes(d)) - before) / tasks;
  await d.db.execute(sql`update dags set completed_at = now() - interval '40 days' where name like 'history-%'`);

  // The live work beside it: READY tasks a claimer takes one at a time, finishing each off the clock.
  const live = 20_000;
  for (let i = 0; i < live / 5000; i++) {
    await dagSubmit(d.db, [{ name: `live-${i}`, params: {}, tasks: Array.from({ length: 5000 }, (_, j) => h.task(`t${j}`)) }]);
  }
  await h.analyze(d);
  await agentRegister(d.db, { id: 'claimer-retention', type: 'bench', capabilities: [], maxConcurrent: 1 });
  const claimOnce = async (into: number[]) => {
    const t0 = performance.now();
    const got = await taskClaim(d.db, 'claimer-retention', { limit: 1, capabilities: [] });
    into.push(performance.now() - t0);
    if (got.length !== 1) throw new Error('the live DAG ran out of READY tasks');
    await d.db.execute(sql`update tasks set status = 'completed', completed_at = now() where id = any(${textArray(got.map((t) => t.id))})`);
  };
  const claimsIdle: number[] = [];
  for (let i = 0; i < 1000; i++) await claimOnce(claimsIdle);

  const claimsDuring: number[] = [];
  let pruning = true;
  const t0 = performance.now();
  const pruned = prune(d.db, { olderThanSec: 30 * 86_400 }).finally(() => { pruning = false; });
  while (pruning) await claimOnce(claimsDuring);
  const counts = await pruned;
  const pruneSeconds = (performance.now() - t0) / 1000;
  if (counts.tasks !== tasks) throw new Error(`pruned ${counts.tasks} tasks, expected ${tasks}`);
  return { bytesPerTask, bytesPerLogLine, pruneSeconds, claimsDuring, claimsIdle };
}
