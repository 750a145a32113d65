import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { agentCreate, dagCreate, databaseReset, rowsOf } from '../helpers/factories.js';
import { sseConnect } from '../helpers/sse.js';
import { eventually } from '../helpers/wait.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { streamWrite } from '../../src/engine/attempt/streams.js';
import { tokenCreate, tokenRevoke } from '../../src/auth/tokens.js';
import { LIMITS } from '../../src/config/index.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import { agentRunners } from '../helpers/runners.js';

// Streams over HTTP: an agent appends chunks to a stream of its attempt (in order, each batch once), and readers
// follow it as server-sent events, live and afterwards, resuming after Last-Event-ID.
const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const { call } = http;
const reader = (await tokenCreate(db, { role: 'read', name: 'reader' })).token;
const { run } = agentRunners(database);
beforeEach(() => databaseReset(db));

async function held() {
  await agentCreate(db, 'a1', ['gen']);
  await dagCreate(db, 'name: s\ndefaults: { max_attempts: 2, retry: { strategy: immediate } }\ntasks:\n  t: { type: t, spec: { constraints: { capabilities: [gen] } } }\n');
  const [t] = await taskClaim(db, 'a1', { start: true });
  return { t: t!, token: await http.agentToken('a1', ['gen']) };
}
type ChunkSeen = { id?: string; seq: number; text?: string; json?: unknown };
const chunksOf = (events: Array<{ event: string; id?: string; data: string }>): ChunkSeen[] =>
  events.filter((e) => e.event === 'chunk').map((e) => ({ id: e.id, ...(JSON.parse(e.data) as { seq: number }) }));

describe('POST /api/tasks/:id/streams/:name', () => {
  it('appends batches in order, each once; refuses a gap, bad chunks, another agent and a reader, writing nothing', async () => {
    const { t, token } = await held();
    const url = `/api/tasks/${t.id}/streams/output`;
    const write = (body: Record<string, unknown>, as = token) => call('POST', url, { token: as, body: { fence: t.fence, ...body } });
    expect((await write({ from_seq: 1, chunks: [{ text: 'Hel' }, { text: 'lo' }] })).body).toEqual({ applied: true, chunks: 2, ended: null });
    // The same batch again (its reply was lost): nothing written twice.
    expect((await write({ from_seq: 1, chunks: [{ text: 'Hel' }, { text: 'lo' }] })).body).toEqual({ applied: false, chunks: 2, ended: null });
    expect((await write({ from_seq: 3, chunks: [{ json: { step: 1 } }] })).body).toEqual({ applied: true, chunks: 3, ended: null });
    const gap = await write({ from_seq: 7, chunks: [{ text: 'x' }] });
    expect([gap.status, gap.body.error.code, gap.body.error.message]).toEqual([400, 'INVALID_INPUT', expect.stringContaining('the next batch starts at 4')]);
    for (const body of [
      { from_seq: 0, chunks: [] }, { from_seq: 4, chunks: [{ text: 1 }] }, { from_seq: 4, chunks: [{ both: 'x' }] },
      { from_seq: 4, chunks: [{ text: 'x'.repeat(LIMITS.streamChunkBytes + 1) }] }, { from_seq: 4, chunks: [{ text: 'a\u0000b' }] },
    ]) {
      const r = await write(body);
      expect([r.status, r.body.error.code], JSON.stringify(body).slice(0, 80)).toEqual([400, 'INVALID_INPUT']);
    }
    const badName = await call('POST', `/api/tasks/${t.id}/streams/Bad%20Name`, { token, body: { fence: t.fence, from_seq: 4, chunks: [] } });
    expect(badName.status).toBe(400);
    await agentCreate(db, 'a2', ['gen']);
    expect((await write({ from_seq: 4, chunks: [{ text: 'x' }] }, await http.agentToken('a2', ['gen']))).status).toBe(403);
    expect((await write({ from_seq: 4, chunks: [{ text: 'x' }] }, reader)).status).toBe(403);
    expect((await call('POST', url, { token, body: { fence: t.fence + 1, from_seq: 4, chunks: [{ text: 'x' }] } })).status).toBe(409);
    expect(await rowsOf(db, sql`select seq, kind, data from task_stream_chunks order by seq`)).toEqual([
      { seq: 1, kind: 'text', data: 'Hel' }, { seq: 2, kind: 'text', data: 'lo' }, { seq: 3, kind: 'json', data: '{"step":1}' },
    ]);
    // Ended: later writes write nothing and say so.
    expect((await write({ from_seq: 4, chunks: [{ text: '!' }], end: true })).body).toEqual({ applied: true, chunks: 4, ended: 'ended' });
    expect((await write({ from_seq: 5, chunks: [{ text: 'late' }] })).body).toEqual({ applied: false, chunks: 4, ended: 'ended' });
  });

  it('past the attempt\'s bytes the stream ends, marked truncated, and the attempt goes on', async () => {
    const { t } = await held();
    const ref = { taskId: t.id, fence: t.fence };
    const big = 'y'.repeat(LIMITS.streamChunkBytes);
    const perBatch = 16;
    let seq = 1;
    let last: Awaited<ReturnType<typeof streamWrite>> | undefined;
    while (!last?.ended) {
      last = await streamWrite(db, ref, { name: 'output', fromSeq: seq, chunks: Array.from({ length: perBatch }, () => ({ kind: 'text' as const, data: big })) });
      seq = last.chunks + 1;
    }
    expect(last.ended).toBe('truncated');
    const [s] = await rowsOf<{ bytes: number; end_reason: string }>(db, sql`select bytes::float8 as bytes, end_reason from task_streams`);
    expect(s!.end_reason).toBe('truncated');
    expect(s!.bytes).toBeLessThanOrEqual(LIMITS.streamBytesPerAttempt);
    expect(s!.bytes).toBeGreaterThan(LIMITS.streamBytesPerAttempt - perBatch * big.length);
    // Another stream of the attempt has no room either; the task itself still runs.
    expect((await streamWrite(db, ref, { name: 'notes', fromSeq: 1, chunks: [{ kind: 'text', data: big }] })).ended).toBe('truncated');
    expect(await rowsOf(db, sql`select status from tasks where id = ${t.id}`)).toEqual([{ status: 'running' }]);
  });
});

describe('GET /api/tasks/:id/streams', () => {
  it('lists each attempt\'s streams with what they hold and how they ended; an unknown task is a 404, an agent refused', async () => {
    const { t, token } = await held();
    const url = `/api/tasks/${t.id}/streams`;
    // Held, nothing written yet: no stream.
    expect((await call('GET', url, { token: reader })).body).toEqual({ streams: [] });
    const ref = { taskId: t.id, fence: t.fence };
    await streamWrite(db, ref, { name: 'output', fromSeq: 1, chunks: [{ kind: 'text', data: 'héllo' }, { kind: 'json', data: '{"n":1}' }] });
    await streamWrite(db, ref, { name: 'notes', fromSeq: 1, chunks: [{ kind: 'text', data: 'n' }], end: true });
    await taskFail(db, { ...ref, errorClass: 'crash', message: 'killed' });
    const [again] = await taskClaim(db, 'a1', { start: true });
    await streamWrite(db, { taskId: t.id, fence: again!.fence }, { name: 'output', fromSeq: 1, chunks: [{ kind: 'text', data: 'second' }] });
    const listed = await call('GET', url, { token: reader });
    expect([listed.status, listed.body]).toEqual([200, { streams: [
      // Each chunk counts at least STREAM_DEFAULTS.chunkMinBytes (64) against the attempt's bytes.
      { name: 'notes', attempt: 1, fence: t.fence, chunks: 1, bytes: 64, endReason: 'ended' },
      { name: 'output', attempt: 1, fence: t.fence, chunks: 2, bytes: 128, endReason: null },
      { name: 'output', attempt: 2, fence: again!.fence, chunks: 1, bytes: 64, endReason: null },
    ] }]);
    const none = await call('GET', '/api/tasks/tsk_nosuchtask000/streams', { token: reader });
    expect([none.status, none.body.error.code]).toEqual([404, 'NOT_FOUND']);
    expect((await call('GET', url, { token })).status).toBe(403);
    expect((await call('GET', url, { token: null })).status).toBe(401);
  });
});

describe('GET /api/tasks/:id/streams/:name (server-sent events)', () => {
  it('follows a stream live from before its first write to its end, each chunk once and in order', async () => {
    const { t } = await held();
    const ref = { taskId: t.id, fence: t.fence };
    const s = await sseConnect(`${http.url}/api/tasks/${t.id}/streams/output`, { token: reader });
    expect(s.status).toBe(200);
    await eventually('the stream event', async () => s.events().some((e) => e.event === 'stream'));
    expect(JSON.parse(s.events()[0]!.data)).toEqual({ taskId: t.id, name: 'output', attempt: 1, fence: t.fence });
    let seq = 1;
    for (const word of ['The ', 'answer ', 'is ']) {
      await streamWrite(db, ref, { name: 'output', fromSeq: seq, chunks: [{ kind: 'text', data: word }] });
      seq++;
    }
    await streamWrite(db, ref, { name: 'output', fromSeq: seq, chunks: [{ kind: 'json', data: '{"n":42}' }], end: true });
    await s.done();
    expect(chunksOf(s.events())).toEqual([
      { id: '1', seq: 1, text: 'The ' }, { id: '2', seq: 2, text: 'answer ' }, { id: '3', seq: 3, text: 'is ' }, { id: '4', seq: 4, json: { n: 42 } },
    ]);
    expect(JSON.parse(s.events().at(-1)!.data)).toEqual({ reason: 'ended', outcome: null, chunks: 4 });
  });

  it('resumes after Last-Event-ID or ?from, reads a named attempt, and ends with the attempt that failed', async () => {
    const { t } = await held();
    const ref = { taskId: t.id, fence: t.fence };
    await streamWrite(db, ref, { name: 'output', fromSeq: 1, chunks: ['a', 'b', 'c', 'd'].map((data) => ({ kind: 'text' as const, data })) });
    const url = `${http.url}/api/tasks/${t.id}/streams/output`;
    const resumed = await sseConnect(url, { token: reader, lastEventId: '2' });
    const fromQuery = await sseConnect(`${url}?from=3`, { token: reader });
    await eventually('both caught up', async () => chunksOf(resumed.events()).length === 2 && chunksOf(fromQuery.events()).length === 1);
    // The writer killed: its attempt fails; what it flushed stays, and the stream ends with the attempt.
    await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'crash', message: 'killed' });
    await Promise.all([resumed.done(), fromQuery.done()]);
    expect(chunksOf(resumed.events()).map((c) => c.id)).toEqual(['3', '4']);
    expect(chunksOf(fromQuery.events()).map((c) => c.id)).toEqual(['4']);
    expect(JSON.parse(resumed.events().at(-1)!.data)).toEqual({ reason: 'attempt_ended', outcome: 'failed', chunks: 4 });
    // The retry's attempt streams apart; attempt 1 is still readable whole.
    const [again] = await taskClaim(db, 'a1', { start: true });
    await streamWrite(db, { taskId: again!.id, fence: again!.fence }, { name: 'output', fromSeq: 1, chunks: [{ kind: 'text', data: 'second' }], end: true });
    const latest = await sseConnect(url, { token: reader });
    const first = await sseConnect(`${url}?attempt=1`, { token: reader });
    await Promise.all([latest.done(), first.done()]);
    expect(chunksOf(latest.events()).map((c) => c.text)).toEqual(['second']);
    expect(chunksOf(first.events()).map((c) => c.text).join('')).toBe('abcd');
    // By the claim's fence, exactly (attempt numbers repeat after a re-run); a fence never written under is a 404.
    const byFence = await sseConnect(`${url}?fence=${t.fence}&attempt=2`, { token: reader });
    await byFence.done();
    expect(chunksOf(byFence.events()).map((c) => c.text).join('')).toBe('abcd');
    expect((await sseConnect(`${url}?fence=${again!.fence + 5}`, { token: reader })).status).toBe(404);
  });

  it('a missing task or stream is a 404, a bad query a 400, an agent or no token refused', async () => {
    const { t, token } = await held();
    const url = `${http.url}/api/tasks/${t.id}/streams/output`;
    const none = await sseConnect(`${http.url}/api/tasks/tsk_nosuchtask000/streams/output`, { token: reader });
    expect([none.status, (await none.json() as { error: { code: string } }).error.code]).toEqual([404, 'NOT_FOUND']);
    expect((await sseConnect(`${url}?attempt=9`, { token: reader })).status).toBe(404);
    expect((await sseConnect(`${url}?from=-1`, { token: reader })).status).toBe(400);
    expect((await sseConnect(url, { token })).status).toBe(403);
    expect((await sseConnect(url)).status).toBe(401);
  });
});

describe('ctx.stream (TypeScript agents)', () => {
  it('a token-by-token writer is read live, intact, in a few batched statements; JSON writes are chunks of their own', async () => {
    const dagId = await dagCreate(db, 'name: gen\ntasks:\n  t: { type: t, spec: { constraints: { capabilities: [gen] } } }\n');
    let release!: () => void;
    const midway = new Promise<void>((r) => { release = r; });
    const tokens = Array.from({ length: 2000 }, (_, i) => `w${i} `);
    await run(defineAgent({
      name: 'writer', capabilities: ['gen'],
      async run(_task, ctx) {
        const out = ctx.stream();
        for (const [i, tok] of tokens.entries()) {
          out.write(tok);
          if (i === 999) { await out.flush(); await midway; }
        }
        out.write({ done: true, words: tokens.length });
        await out.end();
        return 'ok';
      },
    }), { id: 'writer-1' });
    const [task] = await rowsOf<{ id: string }>(db, sql`select id from tasks where dag_id = ${dagId}`);
    await eventually('the first half written', async () => (await rowsOf(db, sql`select 1 from task_stream_chunks`)).length > 0);
    // A reader that connects midway gets what was written, then the rest live.
    const s = await sseConnect(`${http.url}/api/tasks/${task!.id}/streams/output`, { token: reader });
    await eventually('the first half read', async () => chunksOf(s.events()).length > 0);
    release();
    await s.done();
    const chunks = chunksOf(s.events());
    expect(chunks.filter((c) => c.text !== undefined).map((c) => c.text).join('')).toBe(tokens.join(''));
    expect(chunks.at(-1)!.json).toEqual({ done: true, words: 2000 });
    expect(chunks.map((c) => c.seq)).toEqual(chunks.map((_, i) => i + 1));
    // 2,000 writes coalesced: far fewer chunks (and statements) than writes.
    expect(chunks.length).toBeLessThan(20);
    expect(JSON.parse(s.events().at(-1)!.data)).toMatchObject({ reason: 'ended' });
  });
});

describe('stream retention (DAGENT_RETENTION_STREAMS)', () => {
  it('deletes the streams of finished tasks last written before the period, and leaves a running task\'s', async () => {
    const { pruneStreams } = await import('../../src/engine/ops/retention.js');
    const { taskComplete } = await import('../../src/engine/attempt/complete.js');
    await agentCreate(db, 'a1', ['gen']);
    await dagCreate(db, 'name: r\ntasks:\n  done: { type: t, spec: { constraints: { capabilities: [gen] } } }\n  live: { type: t, spec: { constraints: { capabilities: [gen] } } }\n');
    const held = await taskClaim(db, 'a1', { start: true, limit: 2 });
    for (const t of held) await streamWrite(db, { taskId: t.id, fence: t.fence }, { name: 'output', fromSeq: 1, chunks: [{ kind: 'text', data: t.key }], end: true });
    const done = held.find((t) => t.key === 'done')!;
    await taskComplete(db, { taskId: done.id, fence: done.fence, output: 'ok' });
    await db.execute(sql`update task_streams set updated_at = now() - interval '8 days'`);
    expect(await pruneStreams(db, { olderThanSec: 7 * 86400, batchRows: 1 })).toEqual({ streams: 1, chunks: 1 });
    expect(await rowsOf(db, sql`select t.key from task_streams s join tasks t on t.id = s.task_id`)).toEqual([{ key: 'live' }]);
    expect((await sseConnect(`${http.url}/api/tasks/${done.id}/streams/output`, { token: reader })).status).toBe(404);
    // The finished task itself stays (its DAG's retention takes it).
    expect(await rowsOf(db, sql`select status from tasks where id = ${done.id}`)).toEqual([{ status: 'completed' }]);
  });
});

describe('hostile writers and revoked tokens', () => {
  it('a revoked agent token and a stale fence write nothing; text cannot forge events; a reader whose token is revoked mid-stream gets close and the stream ends', async () => {
    const { t, token } = await held();
    const path = `/api/tasks/${t.id}/streams/output`;
    const revokedReader = await tokenCreate(db, { role: 'read', name: 'revoked reader' });
    const s = await sseConnect(`${http.url}${path}`, { token: revokedReader.token });
    // Text that looks like the end of the stream and another chunk is one chunk's text: each chunk is one JSON line.
    const forged = 'a\n\nevent: end\ndata: {"reason":"ended","outcome":null,"chunks":1}\n\nid: 99\r\nevent: chunk\r\ndata: {"seq":99,"text":"x"}\r\n\r\n';
    expect((await call('POST', path, { token, body: { fence: t.fence, from_seq: 1, chunks: [{ text: forged }] } })).body).toMatchObject({ applied: true });
    await eventually('the reader has the chunk', async () => chunksOf(s.events()).length === 1);
    expect(chunksOf(s.events())).toEqual([{ id: '1', seq: 1, text: forged }]);
    expect(s.events().map((e) => e.event)).toEqual(['stream', 'chunk']);

    // The reader's token is revoked: it is told so, its stream ends, and the token opens no other.
    await tokenRevoke(db, revokedReader.id);
    await s.done();
    expect(s.events().at(-1)).toEqual({ event: 'close', data: JSON.stringify({ reason: 'token revoked' }) });
    expect((await sseConnect(`${http.url}${path}`, { token: revokedReader.token })).status).toBe(401);

    // The holder's own agent token, revoked: refused before anything is read or written.
    const revokedWriter = await tokenCreate(db, { role: 'agent', agentId: 'a1', capabilities: ['gen'] });
    await tokenRevoke(db, revokedWriter.id);
    const refused = await call('POST', path, { token: revokedWriter.token, body: { fence: t.fence, from_seq: 2, chunks: [{ text: 'revoked' }] } });
    expect([refused.status, refused.body.error.code]).toEqual([401, 'UNAUTHORIZED']);
    // The attempt ends and the task is claimed again: the first attempt's fence, from the same agent, is stale.
    await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'crash', message: 'gone' });
    const [again] = await taskClaim(db, 'a1', { start: true });
    const stale = await call('POST', path, { token, body: { fence: t.fence, from_seq: 2, chunks: [{ text: 'stale' }] } });
    expect([stale.status, stale.body.error.code]).toEqual([409, 'LEASE_LOST']);
    expect(await rowsOf(db, sql`select fence, seq, data from task_stream_chunks order by fence, seq`)).toEqual([{ fence: t.fence, seq: 1, data: forged }]);
    expect(again!.fence).toBeGreaterThan(t.fence);
  });
});

describe('what a hostile writer or reader cannot do', () => {
  it('no more than streamsPerAttempt names, no row for an empty first batch, no feed for a name never written, a resend racing its twin never truncates', async () => {
    const { t } = await held();
    const ref = { taskId: t.id, fence: t.fence };
    expect(await streamWrite(db, ref, { name: 'empty', fromSeq: 1, chunks: [] })).toEqual({ applied: false, chunks: 0, ended: null });
    expect(await rowsOf(db, sql`select name from task_streams`)).toEqual([]);
    // Readers: a name no attempt wrote is a 404 (the default stream may be followed before its first write).
    expect((await sseConnect(`${http.url}/api/tasks/${t.id}/streams/made-up`, { token: reader })).status).toBe(404);
    const early = await sseConnect(`${http.url}/api/tasks/${t.id}/streams/output?from=0`, { token: reader, lastEventId: '99999999999' });
    expect(early.status).toBe(200);
    // The same batch twice at once (a resend racing the original): one writes it, the other says so; nothing truncated.
    const twins = await Promise.all([0, 1].map(() => streamWrite(db, ref, { name: 'output', fromSeq: 1, chunks: [{ kind: 'text', data: 'once' }] })));
    expect(twins.map((a) => [a.applied, a.chunks, a.ended]).sort()).toEqual([[false, 1, null], [true, 1, null]]);
    await streamWrite(db, ref, { name: 'output', fromSeq: 2, chunks: [], end: true });
    await early.done();
    // An out-of-range Last-Event-ID is ignored: the reader got the stream from ?from.
    expect(chunksOf(early.events()).map((c) => c.text)).toEqual(['once']);
    for (let i = 1; i < LIMITS.streamsPerAttempt; i++) await streamWrite(db, ref, { name: `s${i}`, fromSeq: 1, chunks: [{ kind: 'text', data: 'x' }] });
    await expect(streamWrite(db, ref, { name: 'one-too-many', fromSeq: 1, chunks: [{ kind: 'text', data: 'x' }] }))
      .rejects.toMatchObject({ code: 'INVALID_INPUT', details: { field: 'name' } });
    expect((await rowsOf(db, sql`select count(*)::int as n from task_streams`))[0]).toEqual({ n: LIMITS.streamsPerAttempt });
  });
});
