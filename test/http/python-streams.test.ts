import type { IncomingMessage } from 'node:http';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { sql } from 'drizzle-orm';

// A small per-attempt stream limit, to see a stream truncated without writing 8 MiB: set before any module reads
// the limits (the server runs in this process).
vi.hoisted(() => { process.env.DAGENT_LIMIT_STREAM_BYTES_PER_ATTEMPT = '200000'; });

const { testDatabase } = await import('../helpers/db.js');
const { testHttp } = await import('../helpers/http.js');
const { replyDroppingProxy } = await import('../helpers/reply-dropping-proxy.js');
const { dagCreate, databaseReset, rowsOf, leaseLapsedReaped } = await import('../helpers/factories.js');
const { eventually } = await import('../helpers/wait.js');
const { paidApiStart } = await import('../helpers/paid-api.js');
const { sseConnect } = await import('../helpers/sse.js');
const { hasPython, pythonAgents } = await import('../helpers/python-agent.js');
const { reaperCreate } = await import('../../src/maintenance/reaper.js');
const { tokenCreate } = await import('../../src/auth/tokens.js');

// Streams of the Python agent (agents/python, ctx.stream) against real processes and a real server: a reader follows
// what a handler writes token by token, live, intact and in order; a batch whose reply is lost is written once; past
// the attempt's bytes the stream is truncated and the task goes on; a write refused as LEASE_LOST drops the task.
const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const reaper = reaperCreate({ db });
const paidApi = await paidApiStart();
const startPython = pythonAgents({ url: http.url, paidApiUrl: paidApi.url, agentToken: (id, caps, validators, models) => http.agentToken(id, caps, validators, models) });
const reader = (await tokenCreate(db, { role: 'read', name: 'reader' })).token;

/**
 * Between an agent and the server: forwards every request and its reply, except the first stream write's reply, which
 * it reads from the server (the write has landed) and then drops by destroying the agent's connection.
 */
const writes: Array<{ fromSeq: number; chunks: number; status: number; answer: { applied: boolean; chunks: number }; replyLost: boolean }> = [];
let loseNextWriteReply = false;
const isWrite = (req: IncomingMessage) => req.method === 'POST' && req.url!.includes('/streams/');
const { url: proxyUrl } = await replyDroppingProxy(http.url, {
  drop: (req) => {
    const lost = loseNextWriteReply && isWrite(req);
    if (lost) loseNextWriteReply = false;
    return lost;
  },
  seen: (x) => {
    if (!isWrite(x.req)) return;
    const body = JSON.parse(x.sent.toString()) as { from_seq: number; chunks: unknown[] };
    writes.push({ fromSeq: body.from_seq, chunks: body.chunks.length, status: x.status, answer: JSON.parse(x.reply.toString()), replyLost: x.replyLost });
  },
});

beforeEach(async () => {
  await databaseReset(db);
  paidApi.reset();
  writes.length = 0;
  loseNextWriteReply = false;
});

/** The Python agent (test/fixtures/agents/streamer.py) as `agentId`. */
const agentStart = (agentId: string, args: string[] = [], url = http.url) => startPython('test/fixtures/agents/streamer.py', agentId, args, url);

const DAG = (input: string) => `name: streams\ndefaults: { max_attempts: 2, retry: { strategy: immediate } }\ntasks:
  t: { type: gen, spec: { constraints: { capabilities: [paid] }, input: ${input} } }\n`;
const task = async (dagId: string) => (await rowsOf<{ id: string; status: string; output: unknown; fence: number }>(db, sql`
  select id, status, output, fence from tasks where dag_id = ${dagId}`))[0]!;

/** What the fixture writes: token(i) as streamer.py spells it, a JSON value after every `every` tokens. */
const token = (i: number) => `w${i}${i % 3 === 0 ? 'é' : ''}${i % 7 === 0 ? '🙂' : ''} `;
const written = (n: number, every = 50) => {
  const text = Array.from({ length: n }, (_, i) => token(i)).join('');
  const json = Array.from({ length: Math.floor(n / every) }, (_, k) => ({ i: (k + 1) * every }));
  return { text, json };
};

type Chunk = { seq: number; text?: string; json?: unknown };
const chunksOf = (events: Array<{ event: string; data: string }>): Chunk[] =>
  events.filter((e) => e.event === 'chunk').map((e) => JSON.parse(e.data) as Chunk);
/** The chunks as the writer meant them: the text between two JSON values joined, each JSON value in its place. */
type Piece = string | { json: unknown };
const joined = (chunks: Chunk[]) => chunks.reduce<Piece[]>((out, c) => {
  const last = out.at(-1);
  if (c.text === undefined) out.push({ json: c.json });
  else if (typeof last === 'string') out[out.length - 1] = last + c.text;
  else out.push(c.text);
  return out;
}, []);
const expectedJoined = (n: number, every = 50) => {
  const out: Piece[] = [];
  let text = '';
  for (let i = 0; i < n; i++) {
    text += token(i);
    if ((i + 1) % every === 0) { out.push(text, { json: { i: i + 1 } }); text = ''; }
  }
  if (text) out.push(text);
  return out;
};

describe.sequential('ctx.stream of the Python agent', () => {
  it.skipIf(!hasPython)('300 tokens and 6 JSON values, written one at a time: a reader follows them live, intact and in order, until the stream ends', async () => {
    const half = paidApi.hold('/checkpoint/t');
    const dagId = await dagCreate(db, DAG('{ tokens: 300, hold_after: 150, notes_bytes: 150000 }'));
    const agent = await agentStart('py-streamer', ['--max-tasks', '1']);
    await half.arrived;
    // The handler flushed after 150 tokens and waits: a reader that connects now reads them, then the rest live.
    const { id } = await task(dagId);
    const s = await sseConnect(`${http.url}/api/tasks/${id}/streams/output`, { token: reader });
    expect(s.status).toBe(200);
    await eventually('the first half read', async () => joined(chunksOf(s.events())).filter((x) => typeof x === 'string').join('') === written(150).text);
    expect(s.ended()).toBe(false);
    half.answer();
    await s.done();
    expect((await agent.stopped).code, agent.output()).toBe(0);

    const chunks = chunksOf(s.events());
    expect(joined(chunks)).toEqual(expectedJoined(300));
    expect(chunks.map((c) => c.seq)).toEqual(chunks.map((_, i) => i + 1));
    // 306 writes, coalesced: each JSON value a chunk of its own, the text between two of them a few.
    expect(chunks.length).toBeLessThan(40);
    expect(JSON.parse(s.events().at(-1)!.data)).toMatchObject({ reason: 'ended', chunks: chunks.length });
    const done = await task(dagId);
    expect(done.status).toBe('completed');
    expect(done.output).toEqual({ output: 'ended', notes: null });

    // The notes stream: 150,000 bytes in one write, in chunks of at most 64 KiB, never splitting a character; not
    // ended by its writer, it ended with its attempt.
    const notes = await rowsOf<{ seq: number; kind: string; bytes: number; data: string }>(db, sql`
      select seq, kind, octet_length(data) as bytes, data from task_stream_chunks where name = 'notes' order by seq`);
    expect(notes.map((n) => [n.kind, n.bytes])).toEqual([['text', 65536], ['text', 65536], ['text', 150000 - 2 * 65536], ['json', 13]]);
    expect(notes.slice(0, 3).map((n) => n.data).join('')).toBe('ü'.repeat(75000));
    // Written as the handler returned: the agent flushed it before it completed the task.
    expect(JSON.parse(notes[3]!.data)).toEqual({ done: true });
    const afterwards = await sseConnect(`${http.url}/api/tasks/${id}/streams/notes`, { token: reader });
    await afterwards.done();
    expect(JSON.parse(afterwards.events().at(-1)!.data)).toEqual({ reason: 'attempt_ended', outcome: 'completed', chunks: 4 });
  });

  it.skipIf(!hasPython)('a batch whose reply is lost is sent again under the same from_seq and written once', async () => {
    loseNextWriteReply = true;
    const dagId = await dagCreate(db, DAG('{ tokens: 200, pace_ms: 1 }'));
    const agent = await agentStart('py-lossy', ['--max-tasks', '1'], proxyUrl);
    expect((await agent.stopped).code, agent.output()).toBe(0);
    expect((await task(dagId)).status).toBe('completed');
    // The first write landed (applied) and its reply never reached the agent; the same write again wrote nothing.
    expect(writes[0]).toEqual({ fromSeq: 1, chunks: expect.any(Number), status: 200, answer: expect.objectContaining({ applied: true }), replyLost: true });
    expect(writes[1]).toEqual({ ...writes[0], answer: { ...writes[0]!.answer, applied: false }, replyLost: false });
    expect(writes.slice(2).every((w) => w.answer.applied && !w.replyLost)).toBe(true);
    expect(agent.output()).toMatch(/stream output write from 1: \w+.*; retrying in/);
    const rows = await rowsOf<{ seq: number; kind: string; data: string }>(db, sql`
      select seq, kind, data from task_stream_chunks where name = 'output' order by seq`);
    expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => i + 1));
    expect(joined(rows.map((r) => (r.kind === 'text' ? { seq: r.seq, text: r.data } : { seq: r.seq, json: JSON.parse(r.data) })))).toEqual(expectedJoined(200));
  });

  it.skipIf(!hasPython)('past the attempt\'s stream bytes the stream is truncated: the writer says so, logs a warning, and the task completes', async () => {
    const dagId = await dagCreate(db, DAG('{ tokens: 20, notes_bytes: 300000 }'));
    const agent = await agentStart('py-big', ['--max-tasks', '1']);
    expect((await agent.stopped).code, agent.output()).toBe(0);
    const done = await task(dagId);
    expect(done.status).toBe('completed');
    expect(done.output).toEqual({ output: 'ended', notes: 'truncated' });
    expect(agent.output()).toMatch(/stream notes truncated: the attempt's streams reached their bytes; the attempt goes on/);
    const [s] = await rowsOf<{ end_reason: string; bytes: number }>(db, sql`select end_reason, bytes::int from task_streams where name = 'notes'`);
    expect(s!.end_reason).toBe('truncated');
    expect(s!.bytes).toBeLessThanOrEqual(200000);
  });

  it.skipIf(!hasPython)('a write refused as LEASE_LOST abandons the task: nothing more is written under the stale fence', async () => {
    const half = paidApi.hold('/checkpoint/t');
    const dagId = await dagCreate(db, DAG('{ tokens: 100, hold_after: 40 }'));
    const agent = await agentStart('py-stale', ['--max-tasks', '1']);
    await half.arrived;
    const { id, fence: stale } = await task(dagId);
    // Its first heartbeat ("received") comes 2 s after the claim, the next 20 s later: taken back after the first, it
    // learns of it from a stream write.
    await eventually('the first heartbeat', async () =>
      (await rowsOf(db, sql`select 1 from tasks where id = ${id} and heartbeat_at > claimed_at`)).length > 0);
    const before = await rowsOf(db, sql`select seq from task_stream_chunks where fence = ${stale}`);
    expect(before.length).toBeGreaterThan(0);
    await leaseLapsedReaped(db, reaper, 'py-stale');
    half.answer();
    expect((await agent.stopped).code, agent.output()).toBe(0);
    expect(agent.output()).toMatch(/lease lost on t; dropping it/);
    expect(agent.output()).toMatch(/stream output not written: the lease was lost/);
    expect(await rowsOf(db, sql`select seq from task_stream_chunks where fence = ${stale}`)).toEqual(before);
    // Nothing reported for it: the task waits for another agent, its first attempt failed by the reaper only.
    expect((await task(dagId)).status).toBe('ready');
    expect(agent.output()).not.toMatch(/(complete|fail) t (->|refused)/);
  });
});
