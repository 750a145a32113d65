/**
 * The dashboard's lists at scale for `npm run bench`: `dags` DAG rows (inserted in SQL, newest first spread over a
 * year, one in 100 tagged), then pages of 50 read the way the API reads them (dagPage: keyset on created_at, id),
 * at random depths, with and without a status, tag or search filter. Then the dead-letter list the same way
 * (deadLetterList): one dead-lettered task in each DAG, every other one resolved; among the open ones a task key
 * names one step of 50, a history one agent of 40, and one in three timed out.
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import type { Database } from '../../src/db/handle.js';
import { dagPage, type DagListFilter } from '../../src/db/queries/dags.js';
import { deadLetterList } from '../../src/db/queries/dead-letters.js';
import type { DeadLetterSelector } from '../../src/db/rows.js';

export interface ListFigures { name: string; ms: number[] }

export async function listsBench(d: Database, dags: number, reads = 200): Promise<ListFigures[]> {
  await d.db.execute(sql`
    insert into dags (id, name, status, spec, created_at, completed_at, tags, tasks_total)
    select 'dag_' || lpad(g::text, 14, '0'), 'nightly-report-' || g, case when g % 10 = 0 then 'running' else 'completed' end,
      '{}'::jsonb, now() - make_interval(secs => g * 300), now() - make_interval(secs => g * 300 - 60),
      case when g % 100 = 0 then array['weekly'] else '{}'::text[] end, 1
    from generate_series(1, ${dags}) g`);
  await d.db.execute(sql`vacuum analyze dags`);
  const cursorAt = async (offset: number) => {
    const { rows } = await d.db.execute(sql`select created_at::text as at, id from dags order by created_at desc, id desc offset ${offset} limit 1`);
    const r = rows[0] as { at: string; id: string };
    return { at: r.at, id: r.id };
  };
  const cursors = await Promise.all(Array.from({ length: 20 }, (_, i) => cursorAt(Math.floor(((i + 0.5) / 20) * (dags - 100)))));
  /** `reads` pages read by `page` (its row count), timed one by one. */
  const timed = async (name: string, page: (i: number) => Promise<number>): Promise<ListFigures> => {
    const ms: number[] = [];
    for (let i = 0; i < reads; i++) {
      const t0 = performance.now();
      const rows = await page(i);
      ms.push(performance.now() - t0);
      if (rows === 0) throw new Error(`${name}: an empty page`);
    }
    return { name, ms };
  };
  const time = (name: string, filter: (i: number) => DagListFilter) =>
    timed(name, async (i) => (await dagPage(d.db, { limit: 50, ...filter(i) })).dags.length);
  const figures = [
    await time('DAGs: the first page', () => ({})),
    await time('DAGs: a page deep in the list (keyset cursor)', (i) => ({ cursor: cursors[i % cursors.length] })),
    await time('DAGs: status=running, deep', (i) => ({ status: 'running', cursor: cursors[i % 10] })),
    await time('DAGs: tag=weekly (1 in 100)', () => ({ tag: 'weekly' })),
    await time('DAGs: q=report-4242 (a name part, 1 in 10,000)', () => ({ q: 'report-4242' })),
    await time('DAGs: q=<an id>', (i) => ({ q: cursors[i % cursors.length]!.id })),
  ];
  // Then the dead letters: their tasks go in only now, so the DAG list is read as it was without them.
  const deadLetters = dags;
  await d.db.execute(sql`
    insert into tasks (id, dag_id, key, type, status, spec, retry_policy, attempts)
    select 'tsk_dl' || lpad(g::text, 12, '0'), 'dag_' || lpad(g::text, 14, '0'), 'step-' || ((g / 2) % 50), 'review', 'dead_lettered', '{}'::jsonb, '{}'::jsonb, 3
    from generate_series(1, ${deadLetters}) g`);
  await d.db.execute(sql`
    insert into dead_letters (id, task_id, dag_id, reason, error_class, attempts, history, created_at, resolution)
    select 'dlq_' || lpad(g::text, 14, '0'), 'tsk_dl' || lpad(g::text, 12, '0'), 'dag_' || lpad(g::text, 14, '0'),
      case when g % 3 = 0 then 'timeout after 600 s' else 'model refused: ' || md5(g::text) end,
      case when g % 3 = 0 then 'timeout' else 'invalid_output' end, 3,
      jsonb_build_array(jsonb_build_object('attempt', 1, 'agent', 'reviewer-' || ((g / 2) % 40))),
      now() - make_interval(secs => g * 300 - 30), case when g % 2 = 0 then 'retried' end
    from generate_series(1, ${deadLetters}) g`);
  await d.db.execute(sql`vacuum analyze tasks`);
  await d.db.execute(sql`vacuum analyze dead_letters`);
  const dlCursors = await Promise.all(Array.from({ length: 20 }, async (_, i) => {
    const { rows } = await d.db.execute(sql`
      select created_at::text as at, id from dead_letters where resolution is null order by created_at desc, id desc
      offset ${Math.floor(((i + 0.5) / 20) * (deadLetters / 2 - 100))} limit 1`);
    const r = rows[0] as { at: string; id: string };
    return { at: r.at, id: r.id };
  }));
  const timeDlq = (name: string, filter: (i: number) => DeadLetterSelector & { cursor?: { at: string; id: string } }) =>
    timed(name, async (i) => (await deadLetterList(d.db, { limit: 50, ...filter(i) })).rows.length);
  return [
    ...figures,
    await timeDlq(`dead letters (${deadLetters.toLocaleString('en-US')}, half open): the first page of the open ones`, () => ({})),
    await timeDlq('dead letters: a page deep in the open ones (keyset cursor)', (i) => ({ cursor: dlCursors[i % dlCursors.length] })),
    await timeDlq('dead letters: error_class=timeout (1 in 3)', () => ({ errorClass: 'timeout' })),
    await timeDlq('dead letters: agent=reviewer-7 (in the history, 1 in 40)', () => ({ agentId: 'reviewer-7' })),
    await timeDlq('dead letters: q=step-17 (a part of a task key or reason, 1 in 50)', () => ({ q: 'step-17' })),
  ];
}
