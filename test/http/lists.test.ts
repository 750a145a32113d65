import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { agentCreate, dagCreate, databaseReset, databaseSnapshot, rowsOf } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskFail } from '../../src/engine/attempt/fail.js';

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
beforeEach(() => databaseReset(db));

/** Every page of a list, following `next` until it is null. */
async function allPages(path: string, key: 'dags' | 'entries'): Promise<{ pages: number; ids: string[] }> {
  const ids: string[] = [];
  let pages = 0;
  for (let cursor: string | null = null; ;) {
    const r = await http.call('GET', `${path}${path.includes('?') ? '&' : '?'}${cursor ? `cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    pages++;
    ids.push(...r.body[key].map((x: { id: string }) => x.id));
    cursor = r.body.next;
    if (!cursor) return { pages, ids };
  }
}

describe('the DAG list: search, filters and keyset paging', () => {
  it('pages newest first through every DAG exactly once, also when many were created in the same instant', async () => {
    for (let i = 0; i < 23; i++) await dagCreate(db, `name: page-${i}\ntasks:\n  a: { type: t }\n`);
    // Ten share one created_at to the microsecond: the id breaks the tie, so no page repeats or skips one.
    await db.execute(sql`update dags set created_at = '2026-11-20T10:00:00.123456Z' where name in (${sql.join(Array.from({ length: 10 }, (_, i) => sql`${`page-${i + 5}`}`), sql`, `)})`);
    const expected = (await rowsOf<{ id: string }>(db, sql`select id from dags order by created_at desc, id desc`)).map((r) => r.id);
    const paged = await allPages('/api/dags?limit=4', 'dags');
    expect(paged.ids).toEqual(expected);
    expect(paged.pages).toBe(6);
    const one = await http.call('GET', '/api/dags?limit=100');
    expect([one.body.dags.length, one.body.next]).toEqual([23, null]);
    expect(one.body.dags[0]).toMatchObject({ name: expect.stringMatching(/^page-/), taskCounts: { ready: 1 } });
  });

  it('finds DAGs by id or part of the name or title (any case, wildcards taken literally), by status, tag and creation range', async () => {
    const release = await dagCreate(db, 'name: release-notes\ntitle: Weekly Release\ntasks:\n  a: { type: t, tags: [docs, weekly] }\n');
    const fix = await dagCreate(db, 'name: fix_100pct\ntasks:\n  a: { type: t, tags: [code] }\n  b: { type: t, tags: [docs] }\n');
    const other = await dagCreate(db, 'name: other\ntasks:\n  a: { type: t }\n');
    await db.execute(sql`update dags set status = 'completed', created_at = '2026-01-05T00:00:00Z' where id = ${other}`);
    const names = async (query: string) => (await http.call('GET', `/api/dags?${query}`)).body.dags.map((d: { name: string }) => d.name).sort();
    expect(await names('q=RELEASE')).toEqual(['release-notes']);
    expect(await names('q=weekly')).toEqual(['release-notes']);
    expect(await names(`q=${fix}`)).toEqual(['fix_100pct']);
    expect(await names('q=100%25')).toEqual([]);
    expect(await names('q=_100')).toEqual(['fix_100pct']);
    expect(await names('q=e_n')).toEqual([]);
    expect(await names('tag=docs')).toEqual(['fix_100pct', 'release-notes']);
    expect(await names('tag=code')).toEqual(['fix_100pct']);
    expect(await names('status=completed')).toEqual(['other']);
    expect(await names(`from=${encodeURIComponent('2026-01-01T00:00:00Z')}&to=${encodeURIComponent('2026-02-01T00:00:00Z')}`)).toEqual(['other']);
    expect(await names('tag=docs&q=fix')).toEqual(['fix_100pct']);
    expect((await rowsOf<{ tags: string[] }>(db, sql`select tags from dags where id = ${release}`))[0]!.tags).toEqual(['docs', 'weekly']);
  });

  it('refuses a cursor it did not give and a malformed date with 400, naming the field', async () => {
    const before = await databaseSnapshot(db);
    const badCursor = await http.call('GET', '/api/dags?cursor=not-a-cursor');
    expect([badCursor.status, badCursor.body.error.code, badCursor.body.error.message]).toEqual([400, 'INVALID_INPUT', expect.stringContaining('cursor: not a cursor this list gave')]);
    const forged = Buffer.from(JSON.stringify(['now(); drop table dags', 'x'])).toString('base64url');
    expect((await http.call('GET', `/api/dags?cursor=${forged}`)).status).toBe(400);
    // The right shape, a date that does not exist: refused here, not by PostgreSQL.
    const month13 = Buffer.from(JSON.stringify(['2026-13-01 00:00:00+00', 'dag_x'])).toString('base64url');
    expect((await http.call('GET', `/api/dags?cursor=${month13}`)).status).toBe(400);
    const feb30 = Buffer.from(JSON.stringify(['2026-02-30 00:00:00.5+00', 'dag_x'])).toString('base64url');
    expect((await http.call('GET', `/api/dlq?cursor=${feb30}`)).status).toBe(400);
    const badDate = await http.call('GET', '/api/dags?from=yesterday');
    expect([badDate.status, badDate.body.error.message]).toEqual([400, expect.stringContaining('query.from')]);
    const badDlq = await http.call('GET', '/api/dlq?cursor=%7B%7D');
    expect(badDlq.status).toBe(400);
    expect(await databaseSnapshot(db)).toBe(before);
  });
});

describe('the dead-letter list: filters, paging and bulk actions from the same filter', () => {
  it('pages through open entries, filters by error class, type and search, and retries every entry a filter matches', async () => {
    const yaml = ['name: poison', 'tasks:',
      ...Array.from({ length: 9 }, (_, i) => `  fetch-${i}: { type: ${i % 3 === 0 ? 'scrape' : 'llm'}, max_attempts: 1 }`)].join('\n');
    const dagId = await dagCreate(db, yaml);
    await agentCreate(db, 'w');
    const claimed = await taskClaim(db, 'w', { start: true, limit: 9 });
    for (const [i, t] of claimed.entries()) {
      await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: i % 2 ? 'timeout' : 'crash', message: `failure ${t.key}` });
    }
    const paged = await allPages('/api/dlq?limit=4', 'entries');
    expect(paged.pages).toBe(3);
    expect(new Set(paged.ids).size).toBe(9);
    const list = async (query: string) => (await http.call('GET', `/api/dlq?${query}`)).body.entries.map((e: { taskKey: string }) => e.taskKey).sort();
    expect(await list('error_class=timeout')).toHaveLength(4);
    expect(await list('type=scrape')).toEqual(['fetch-0', 'fetch-3', 'fetch-6']);
    expect(await list('q=FETCH-7')).toEqual(['fetch-7']);
    expect(await list(`dag_id=${dagId}&type=scrape&error_class=crash`)).toEqual((await list('type=scrape&error_class=crash')));

    // The bulk action takes the list's filter: it resolves exactly what the list shows.
    const shown = await list('type=llm&error_class=crash');
    const bulk = await http.call('POST', '/api/dlq/bulk', { body: { action: 'retry', filter: { type: 'llm', error_class: 'crash' }, note: 'provider back' } });
    expect(bulk.status, JSON.stringify(bulk.body)).toBe(200);
    expect(bulk.body.ids).toHaveLength(shown.length);
    expect(await list('type=llm&error_class=crash')).toEqual([]);
    const bySearch = await http.call('POST', '/api/dlq/bulk', { body: { action: 'cancel', filter: { q: 'fetch-3' }, note: 'not needed' } });
    expect(bySearch.body.ids).toHaveLength(1);
    expect(await list('')).toHaveLength(9 - shown.length - 1);
    const none = await http.call('POST', '/api/dlq/bulk', { body: { action: 'cancel', filter: {}, note: 'everything?' } });
    expect([none.status, none.body.error.message]).toEqual([400, expect.stringContaining('a bulk action needs a filter')]);
  });
});
