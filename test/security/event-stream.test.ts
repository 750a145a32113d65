import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { tokenCreate, tokenRevoke } from '../../src/engine/tokens.js';
import { refused, serverStart, type ServerProcess } from './helpers/server.js';

// Finding 7: many concurrent first subscribers each opened their own LISTEN connection.
// Finding 8: `?dag_id=%00` broke live updates for every subscriber.
// Finding 9: a stream went on after its token was revoked.
const database = await testDatabase();
const { db } = database;
const server = await serverStart(database);

/** An open event stream and everything it has received so far. */
async function stream(s: ServerProcess, token: string, query = '') {
  const ctl = new AbortController();
  const res = await fetch(`${s.url}/api/events${query}`, { headers: { authorization: `Bearer ${token}` }, signal: ctl.signal });
  let text = '';
  let ended = false;
  const reading = (async () => {
    const reader = res.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (done) break;
      text += Buffer.from(value!).toString('utf8');
    }
    ended = true;
  })();
  return { status: res.status, text: () => text, ended: () => ended, close: async () => { ctl.abort(); await reading; } };
}

/** Connections of this database whose last statement was a LISTEN. */
const listeners = async () => (await rowsOf<{ n: number }>(db, sql`
  select count(*)::int as n from pg_stat_activity where datname = current_database() and query ilike 'listen %'`))[0]!.n;

describe('the live event stream', () => {
  it('100 subscribers arriving at once share one LISTEN connection', async () => {
    const token = server.adminToken;
    const streams = await Promise.all(Array.from({ length: 100 }, () => stream(server, token)));
    expect(streams.every((st) => st.status === 200)).toBe(true);
    // The server process's one listener, shared by its agents and every subscriber.
    expect(await listeners()).toBe(1);
    await Promise.all(streams.map((st) => st.close()));
  });

  it('an invalid filter is a 400 (a NUL, not a DAG id) or a 404 (an unknown DAG), and live updates go on for everyone else', async () => {
    const token = server.adminToken;
    const watcher = await stream(server, token);
    await refused(400, 'INVALID_INPUT', server.call('GET', '/api/events?dag_id=%00', { token }), /query\.dag_id/);
    await refused(400, 'INVALID_INPUT', server.call('GET', '/api/events?dag_id=not-a-dag', { token }), /query\.dag_id: must be a DAG id/);
    await refused(404, 'NOT_FOUND', server.call('GET', '/api/events?dag_id=dag_00000000000000', { token }), /DAG dag_00000000000000 not found/);
    const r = await server.call('POST', '/api/dags', { raw: 'name: still-live\ntasks:\n  a: { type: t }\n', contentType: 'application/yaml' });
    const dagId = r.body.results[0].dagId;
    await eventually('the watcher hears of the new DAG', async () => watcher.text().includes(dagId));
    await watcher.close();
  });

  it('a stream closes within seconds of its token being revoked', async () => {
    const { id, token } = await tokenCreate(db, { role: 'admin' });
    const st = await stream(server, token);
    expect(st.status).toBe(200);
    await tokenRevoke(db, id);
    await eventually('the stream closed', async () => st.ended(), 10_000);
    expect(st.text()).toMatch(/event: close\ndata: \{"reason":"token revoked"\}/);
    await st.close();
  });
});
