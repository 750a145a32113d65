import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { tokenCreate, tokenRevoke } from '../../src/auth/tokens.js';
import { refused, serverStart } from './helpers/server.js';
import { eventStream as stream } from './helpers/event-stream.js';

// Finding 7: many concurrent first subscribers each opened their own LISTEN connection.
// Finding 8: `?dag_id=%00` broke live updates for every subscriber.
// Finding 9: a stream went on after its token was revoked.
const database = await testDatabase();
const { db } = database;
const server = await serverStart(database);

/** dagent listener connections to this database (their application_name). */
const listeners = async () => (await rowsOf<{ n: number }>(db, sql`
  select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name like 'dagent-listener%'`))[0]!.n;

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

  it('a reader that stops reading is cut off once its backlog passes the limit; the server holds no more for it and others go on', async () => {
    // A server of its own (its own metrics), at a 2 MiB limit: a reader that reads keeps up with a burst of
    // 100 failures (~1 MB). The kernel's socket buffers take some megabytes before anything waits in the
    // server, so the events are made large: failures with long messages.
    const small = await serverStart(database, { env: { DAGENT_LIMIT_STREAM_BACKLOG_BYTES: String(2 * 1024 * 1024) } });
    try {
      const keys = Array.from({ length: 3000 }, (_, i) => `  k${i}: { type: t, max_attempts: 5, retry: { strategy: fixed, initial_delay: 1h }, spec: { constraints: { capabilities: [lag] } } }`).join('\n');
      const dag = await small.call('POST', '/api/dags', { raw: `name: lagging\ntasks:\n${keys}\n`, contentType: 'application/yaml' });
      expect(dag.status).toBe(201);
      const dagId = dag.body.results[0].dagId;
      // A raw connection that sends its request and then reads nothing.
      const url = new URL(small.url);
      const sock = net.connect(Number(url.port), url.hostname);
      await new Promise((r) => sock.once('connect', r));
      let closed = false;
      sock.on('close', () => { closed = true; });
      sock.on('error', () => undefined);
      sock.write(`GET /api/events HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${small.adminToken}\r\n\r\n`);
      sock.pause();
      const watcher = await stream(small, small.adminToken);
      const dropped = async () => Number(/^dagent_event_streams_dropped_total (\d+)/m.exec((await small.call('GET', '/metrics')).body)?.[1] ?? 0);
      // Events pile up behind the silent reader until it is cut off: each failure's event carries a 9 kB message.
      await small.call('POST', '/api/agents', { body: { id: 'lagger', type: 'w', capabilities: ['lag'], max_concurrent: 100 } });
      const message = 'm'.repeat(9_000);
      for (let round = 0; round < 30 && (await dropped()) === 0; round++) {
        const c = await small.call('POST', '/api/agents/lagger/claim', { body: { dag_id: dagId, limit: 100, start: true } });
        expect(c.status).toBe(200);
        await Promise.all(c.body.tasks.map((t: { id: string; fence: number }) => small.call('POST', `/api/tasks/${t.id}/fail`, { body: { fence: t.fence, error_class: 'lag', message } })));
        await new Promise((r) => setTimeout(r, 200)); // the event reader catches up
      }
      expect(await dropped()).toBe(1);
      sock.resume();
      await eventually('the silent reader\'s connection was closed by the server', async () => closed);
      // The other subscriber is still served.
      const after = (await small.call('POST', '/api/dags', { raw: 'name: after-the-cut\ntasks:\n  a: { type: t }\n', contentType: 'application/yaml' })).body.results[0].dagId;
      await eventually('the other watcher still hears news', async () => watcher.text().includes(after));
      expect(watcher.ended()).toBe(false);
      await watcher.close();
    } finally {
      await small.stop();
    }
  });
});
