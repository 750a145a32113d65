/**
 * The dashboard's lists at scale for `npm run bench`: `dags` DAG rows (inserted in SQL, newest first spread over a
 * year, one in 100 tagged), then pages of 50 read the way the API reads them (dagPage: keyset on created_at, id),
 * at random depths, with and without a status, tag or search filter.
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import type { Database } from '../../src/db/connection.js';
import { dagPage, type DagListFilter } from '../../src/db/queries/dags.js';

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
  const time = async (name: string, filter: (i: number) => DagListFilter): Promise<ListFigures> => {
    const ms: number[] = [];
    for (let i = 0; i < reads; i++) {
      const t0 = performance.now();
      const page = await dagPage(d.db, { limit: 50, ...filter(i) });
      ms.push(performance.now() - t0);
      if (page.dags.length === 0) throw new Error(`${name}: an empty page`);
    }
    return { name, ms };
  };
  return [
    await time('first page', () => ({})),
    await time('a page deep in the list (keyset cursor)', (i) => ({ cursor: cursors[i % cursors.length] })),
    await time('status=running, deep', (i) => ({ status: 'running', cursor: cursors[i % 10] })),
    await time('tag=weekly (1 in 100)', () => ({ tag: 'weekly' })),
    await time('q=report-4242 (a name part, 1 in 10,000)', () => ({ q: 'report-4242' })),
    await time('q=<an id>', (i) => ({ q: cursors[i % cursors.length]!.id })),
  ];
}
