import http from 'node:http';
import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, rowsOf } from '../helpers/factories.js';
import { frontendRead } from '../helpers/pg-frontend.js';
import { sseConnect, sseParse, type SseEvent } from '../helpers/sse.js';
import { eventually } from '../helpers/wait.js';
import { serverStart } from '../security/helpers/server.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { LIMITS, STREAM_DEFAULTS } from '../../src/config/index.js';
import { LISTENER_APPLICATION_NAME } from '../../src/db/ready-listener.js';
import { faultProxy } from './helpers/proxy.js';

// Readers of a task's stream on a real `dagent up` node: 500 of them share one read per write and hold no database
// connection; one that stops reading is cut off without slowing the writer or the others, and resumes.
const database = await testDatabase({ poolSize: 2 });
const { db } = database;
/** The node reaches PostgreSQL through this proxy, which records what it sends: the test counts the node's reads. */
const proxy = await faultProxy(database.url);
/** The node's pool (DAGENT_DB_POOL): what it may hold at PostgreSQL besides its one LISTEN connection. */
const POOL = 4;
/** The node's pool connections carry this application_name (PGAPPNAME); its LISTEN connection's begins with LISTENER_APPLICATION_NAME. */
const NODE_APP = 'stream-readers-node';
/**
 * What the node lets one attempt's streams hold (DAGENT_LIMIT_STREAM_BYTES_PER_ATTEMPT), above the default 8 MiB: the
 * loopback socket buffers of a reader that reads nothing took about 4 MiB here before anything waited in the node.
 */
const ATTEMPT_BYTES = 32 * 1024 * 1024;
const node = await serverStart(database, {
  env: { DATABASE_URL: proxy.url, DAGENT_DB_POOL: String(POOL), PGAPPNAME: NODE_APP, DAGENT_LIMIT_STREAM_BYTES_PER_ATTEMPT: String(ATTEMPT_BYTES) },
});
const readToken = (await tokenCreate(db, { role: 'read', name: 'stream reader' })).token;
beforeEach(() => databaseReset(db));

/** A task held by agent `writer`, and a token to write its streams over HTTP as that agent. */
async function held() {
  await agentCreate(db, 'writer', ['gen']);
  await dagCreate(db, 'name: s\ntasks:\n  t: { type: t, spec: { constraints: { capabilities: [gen] } } }\n');
  const [t] = await taskClaim(db, 'writer', { start: true });
  const token = (await tokenCreate(db, { role: 'agent', agentId: 'writer', capabilities: ['gen'] })).token;
  const url = `/api/tasks/${t!.id}/streams/output`;
  let next = 1;
  /** POST one batch to the node, numbered after the last; it must be acknowledged as written. */
  const write = async (texts: string[], end = false) => {
    const r = await node.call('POST', url, { token, body: { fence: t!.fence, from_seq: next, chunks: texts.map((text) => ({ text })), end } });
    expect([r.status, r.body.applied], JSON.stringify(r.body).slice(0, 200)).toEqual([200, true]);
    next += texts.length;
  };
  return { url: `${node.url}${url}`, write };
}

const chunksOf = (events: SseEvent[]) => events.filter((e) => e.event === 'chunk').map((e) => ({ id: e.id, ...(JSON.parse(e.data) as { seq: number; text: string }) }));

/** Chunk reads (streamChunksRead's statement) the node has sent PostgreSQL so far, on every connection it opened. */
const chunkReads = () => proxy.sent().map(frontendRead)
  .flatMap((s) => s.statements).filter((s) => /^\s*select seq, kind, data from task_stream_chunks/.test(s.text)).length;

/** The node's connections at PostgreSQL: its pool's, and LISTEN connections. */
async function nodeConnections(): Promise<{ pool: number; listen: number }> {
  const [r] = await rowsOf<{ pool: number; listen: number }>(db, sql`
    select count(*) filter (where application_name = ${NODE_APP})::int as pool,
      count(*) filter (where application_name like ${`${LISTENER_APPLICATION_NAME}%`})::int as listen
    from pg_stat_activity where datname = current_database()`);
  return r!;
}

describe('500 readers of one stream on one node', () => {
  it('each gets every chunk once and in order; the node holds no more connections than with none, and reads once per write, not once per reader', async () => {
    const READERS = 500;
    const CHUNKS = 300;
    const { url, write } = await held();
    const before = await nodeConnections();
    const readers = await Promise.all(Array.from({ length: READERS }, () => sseConnect(url, { token: readToken })));
    expect(readers.filter((r) => r.status !== 200)).toEqual([]);
    // The first chunk reached every reader: each follows the stream's feed from here on.
    await write(['c1']);
    await eventually('every reader has the first chunk', async () => readers.every((r) => r.events().some((e) => e.event === 'chunk')), 60_000);
    const readsBefore = chunkReads();
    const startedAt = Date.now();
    let during: { pool: number; listen: number } | undefined;
    for (let seq = 2; seq <= CHUNKS; seq++) {
      await write([`c${seq}`], seq === CHUNKS);
      if (seq === CHUNKS / 2) during = await nodeConnections();
    }
    await Promise.all(readers.map((r) => r.done()));
    const reads = chunkReads() - readsBefore;
    const elapsedMs = Date.now() - startedAt;

    const expected = Array.from({ length: CHUNKS }, (_, i) => ({ id: String(i + 1), seq: i + 1, text: `c${i + 1}` }));
    for (const r of readers) {
      expect(chunksOf(r.events())).toEqual(expected);
      expect(r.events().at(-1)).toMatchObject({ event: 'end' });
      expect(JSON.parse(r.events().at(-1)!.data)).toEqual({ reason: 'ended', outcome: null, chunks: CHUNKS });
    }
    // Readers hold no connection: with 500 of them the node has its pool, at most, and the one LISTEN connection
    // its feeds share, as with none.
    expect(before.listen).toBe(1);
    expect(during!.listen).toBe(1);
    expect(during!.pool).toBeLessThanOrEqual(POOL);
    // One read per write for the stream, fanned out to the 500: each write's NOTIFY wakes the stream's feed once (a
    // wake during a read folds into one more read), and its poll (STREAM_DEFAULTS.pollMs) wakes it once per period.
    // A read per reader would be 500 per write.
    expect(reads).toBeGreaterThan(0);
    expect(reads, `${reads} reads for ${CHUNKS - 1} writes in ${elapsedMs} ms`).toBeLessThanOrEqual(CHUNKS - 1 + Math.ceil(elapsedMs / STREAM_DEFAULTS.pollMs) + 1);
  }, 180_000);
});

/**
 * A GET of the stream over a socket that reads nothing until `resume` is called: its kernel buffers fill, then what
 * the node writes for it waits in the node. `resume` reads the rest and resolves once the node closed the connection.
 */
function silentReader(url: string, token: string) {
  let text = '';
  let res: http.IncomingMessage | undefined;
  const answered = new Promise<http.IncomingMessage>((resolve, reject) => {
    http.get(url, { agent: false, headers: { authorization: `Bearer ${token}` } }, resolve).on('error', reject);
  }).then((r) => (res = r));
  return {
    answered,
    resume: () => new Promise<SseEvent[]>((resolve) => {
      res!.setEncoding('utf8');
      res!.on('data', (s: string) => { text += s; });
      res!.on('error', () => undefined); // a connection the server cut off ends in "aborted"
      res!.on('close', () => resolve(sseParse(text).events));
    }),
  };
}

describe('a reader that stops reading', () => {
  it('does not slow the writer or another reader; it is cut off past LIMITS.streamBacklogBytes and resumes after Last-Event-ID', async () => {
    const { url, write } = await held();
    const silent = silentReader(url, readToken);
    expect((await silent.answered).statusCode).toBe(200);
    const reader = await sseConnect(url, { token: readToken });
    // 256 KiB a batch, in 64 KiB chunks, until the node cuts the silent reader off (the kernel's socket buffers take
    // some of it first), then as much again: every batch acknowledged, while the silent reader reads nothing.
    const chunk = (seq: number) => `${seq}:`.padEnd(LIMITS.streamChunkBytes, 'x');
    const PER_BATCH = 4;
    const MAX_BATCHES = Math.floor(ATTEMPT_BYTES / (PER_BATCH * LIMITS.streamChunkBytes)) - 1;
    let seq = 0;
    let batches = 0;
    const cutOff = () => node.output().includes('stream reader fell too far behind');
    while (!cutOff() && batches < MAX_BATCHES) {
      await write(Array.from({ length: PER_BATCH }, () => chunk(++seq)));
      batches++;
      // Give the node's feed the time to send each batch before the next; a cut-off is seen in its log.
      await eventually('the reader has the batch', async () => chunksOf(reader.events()).length === seq);
    }
    expect(cutOff(), `not cut off after ${batches} batches`).toBe(true);
    const afterCut = Math.min(batches, MAX_BATCHES - batches);
    for (let i = 0; i < afterCut; i++) await write(Array.from({ length: PER_BATCH }, () => chunk(++seq)), i === afterCut - 1);
    await reader.done();
    const all = Array.from({ length: seq }, (_, i) => i + 1);
    expect(chunksOf(reader.events()).map((c) => c.seq)).toEqual(all);
    expect(chunksOf(reader.events()).every((c) => c.text === chunk(c.seq))).toBe(true);
    expect(JSON.parse(reader.events().at(-1)!.data)).toMatchObject({ reason: 'ended', chunks: seq });

    // The silent reader got what reached its socket before the cut, a beginning of the stream, and no end.
    const got = await silent.resume();
    const first = chunksOf(got);
    expect(first.length).toBeGreaterThan(0);
    expect(first.length).toBeLessThan(seq);
    expect(first.map((c) => c.seq)).toEqual(all.slice(0, first.length));
    expect(got.some((e) => e.event === 'end')).toBe(false);
    // It resumes after the last chunk it has, from the database: the rest once, and the end.
    const resumed = await sseConnect(url, { token: readToken, lastEventId: first.at(-1)!.id });
    await resumed.done();
    expect([...first, ...chunksOf(resumed.events())].map((c) => c.seq)).toEqual(all);
    expect(chunksOf(resumed.events()).every((c) => c.text === chunk(c.seq))).toBe(true);
    expect(JSON.parse(resumed.events().at(-1)!.data)).toMatchObject({ reason: 'ended', chunks: seq });
  }, 180_000);
});
