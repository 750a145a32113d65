import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../src/db/open.js';
import type { Db } from '../../src/db/handle.js';
import { embeddedServerStart } from '../../src/db/embedded.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { agentProcesses, type AgentProcess } from '../helpers/agent-process.js';
import { dagCreate, databaseReset, leaseLapsedReaped, rowsOf } from '../helpers/factories.js';
import { paidApiStart } from '../helpers/paid-api.js';
import { sseConnect, type SseEvent } from '../helpers/sse.js';
import { eventually } from '../helpers/wait.js';
import { faultProxy } from './helpers/proxy.js';

// A stream's writer (ctx.stream in a real agent process) meets a fault: killed with SIGKILL mid-stream, its
// database restarted while it writes, a write's reply lost. What it flushed stays readable, each chunk is written
// once, and readers (server-sent events) end with everything once and in order.
const STREAMER = 'test/fixtures/agents/streamer.ts';
/** Past the waits below put together, so a failing test says which wait it was (a busy 2-core machine is slow). */
const TEST_TIMEOUT_MS = 150_000;
/** The streamer holds its first attempt at /checkpoint/1 of this server (it reads DAGENT_TEST_PAID_API). */
const holds = await paidApiStart();
process.env.DAGENT_TEST_PAID_API = holds.url;

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const readToken = (await tokenCreate(db, { role: 'read', name: 'stream reader' })).token;
const agentProcess = agentProcesses(database.url);
const reaper = reaperCreate({ db });
// The lost reply: an agent whose connections go through a fault proxy.
const proxy = await faultProxy(database.url);
const agentThroughProxy = agentProcesses(proxy.url);

// The restart: a server of this file's own, so stopping it touches no other file's database; its own HTTP server
// (closed first: hooks after the tests run last-registered first) serves the readers.
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-streams-restart-'));
chmodSync(dataDir, 0o755);
let ownServer = await embeddedServerStart({ dataDir, database: 'streams_restart', ephemeral: true });
const own = await databaseOpen({ url: ownServer.url, poolSize: 4 });
afterAll(async () => {
  await own.close();
  await ownServer.stop().catch(() => {});
  rmSync(dataDir, { recursive: true, force: true });
});
const ownHttp = await testHttp(own);
const ownReadToken = (await tokenCreate(own.db, { role: 'read', name: 'stream reader' })).token;
const agentOnOwnServer = agentProcesses(ownServer.url, null);

beforeEach(async () => {
  await databaseReset(db);
  holds.reset();
});

/**
 * One streamer task. heartbeat_sec 60 (a 180 s lease) unless the test reaps it: a slow restart on this machine must
 * not make a second attempt. `input`: the streamer's (lines, forever, holdAt).
 */
const DAG = (input: string, heartbeatSec = 60) => `name: streamed\ndefaults: { max_attempts: 2, retry: { strategy: immediate } }\ntasks:
  t: { type: stream, spec: { constraints: { capabilities: [stream], heartbeat_sec: ${heartbeatSec} }, input: ${input} } }\n`;
/** What the streamer writes in `attempt`, lines `from` to `to`. */
const lines = (attempt: number, from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `${attempt}:${from + i}\n`).join('');

const chunksOf = (events: SseEvent[]) => events.filter((e) => e.event === 'chunk').map((e) => ({ seq: Number(e.id), text: (JSON.parse(e.data) as { text: string }).text }));
const endOf = (events: SseEvent[]) => (events.at(-1)?.event === 'end' ? JSON.parse(events.at(-1)!.data) as unknown : undefined);

async function taskOf(on: Db, dagId: string) {
  return (await rowsOf<{ id: string; status: string; fence: number; attempts: number }>(on, sql`
    select id, status, fence, attempts from tasks where dag_id = ${dagId}`))[0];
}
/** The chunks of the stream of the attempt `fence` held, as stored. */
function stored(on: Db, taskId: string, fence: number) {
  return rowsOf<{ seq: number; text: string }>(on, sql`
    select seq, data as text from task_stream_chunks where task_id = ${taskId} and fence = ${fence} and name = 'output' order by seq`);
}
/** Chunks numbered 1, 2, 3 … with nothing missing. */
const numbered = (chunks: Array<{ seq: number }>) => chunks.every((c, i) => c.seq === i + 1);

async function running(on: Db, dagId: string, agent: AgentProcess) {
  return eventually('the task running with chunks written', async () => {
    const t = await taskOf(on, dagId);
    return t?.status === 'running' && (await stored(on, t.id, t.fence)).length > 0 && t;
  }, 30_000).catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
}

describe('a writer killed (SIGKILL) mid-stream', () => {
  it('leaves what it flushed readable; a reader ends with the attempt (attempt_ended) once it is reaped; the retry streams apart; nothing twice', async () => {
    const dagId = await dagCreate(db, DAG('{ forever: true, lines: 50 }'));
    const first = await agentProcess(STREAMER, 'streamer-killed');
    const t1 = await running(db, dagId, first);
    const url = `${http.url}/api/tasks/${t1.id}/streams/output`;
    const reader = await sseConnect(url, { token: readToken });
    // Killed while it writes: the reader has had some chunks live.
    await eventually('the reader has 20 chunks', async () => chunksOf(reader.events()).length >= 20);
    first.child.kill('SIGKILL');
    expect(await first.exited).toBe(null);
    await leaseLapsedReaped(db, reaper, 'streamer-killed');
    await reader.done();

    // Every chunk it flushed, once and in order, then the end: its attempt ended, with that attempt's outcome.
    const flushed = await stored(db, t1.id, t1.fence);
    expect(chunksOf(reader.events())).toEqual(flushed);
    expect(numbered(flushed)).toBe(true);
    // A crash charged as an attempt (its stream writes showed it had its claim: db/queries/task-hold.ts taskUnstartedSql).
    expect(await rowsOf(db, sql`select outcome, error_class from attempts where task_id = ${t1.id} and fence = ${t1.fence}`))
      .toEqual([{ outcome: 'failed', error_class: 'crash' }]);
    expect(endOf(reader.events())).toEqual({ reason: 'attempt_ended', outcome: 'failed', chunks: flushed.length });
    // Whole lines 1..n: a batch is written whole or not at all.
    const text1 = flushed.map((c) => c.text).join('');
    const n = text1.split('\n').length - 1;
    expect(text1).toBe(lines(1, 1, n));

    // The retry, in another process, writes its own stream: read as the latest; attempt 1's stays as it was.
    const second = await agentProcess(STREAMER, 'streamer-retry');
    await eventually('the retry completed', async () => (await taskOf(db, dagId))?.status === 'completed', 30_000)
      .catch((e: Error) => { throw new Error(`${e.message}\n${second.output()}`); });
    const t2 = (await taskOf(db, dagId))!;
    expect(t2.fence).not.toBe(t1.fence);
    const [latest, firstAttempt] = await Promise.all([sseConnect(url, { token: readToken }), sseConnect(`${url}?attempt=1`, { token: readToken })]);
    await Promise.all([latest.done(), firstAttempt.done()]);
    const attemptOf = (events: SseEvent[]) => (JSON.parse(events.find((e) => e.event === 'stream')!.data) as { attempt: number; fence: number });
    expect(attemptOf(latest.events())).toMatchObject({ attempt: 2, fence: t2.fence });
    expect(attemptOf(firstAttempt.events())).toMatchObject({ attempt: 1, fence: t1.fence });
    expect(chunksOf(latest.events()).map((c) => c.text).join('')).toBe(lines(2, 1, 50));
    expect(endOf(latest.events())).toMatchObject({ reason: 'ended', outcome: 'completed' });
    expect(chunksOf(firstAttempt.events())).toEqual(flushed);
    expect(await stored(db, t1.id, t1.fence)).toEqual(flushed);
    expect(numbered(await stored(db, t2.id, t2.fence))).toBe(true);
  }, TEST_TIMEOUT_MS);
});

/**
 * The streamer's first attempt: lines 1..HOLD_AT flushed, then held at /checkpoint/1 while the test breaks the
 * database; once let go it writes lines up to LINES during the fault, and ends the stream.
 */
const HOLD_AT = 200;
const LINES = 400;

describe('a database restart mid-stream', () => {
  it('the batches written during the outage are sent again and written once; a reader that stays and one that resumes after Last-Event-ID end with everything once, in order', async () => {
    const checkpoint = holds.hold('/checkpoint/1');
    const dagId = await dagCreate(own.db, DAG(`{ lines: ${LINES}, holdAt: ${HOLD_AT} }`));
    const agent = await agentOnOwnServer(STREAMER, 'streamer-restart');
    await checkpoint.arrived;
    const t = (await taskOf(own.db, dagId))!;
    const url = `${ownHttp.url}/api/tasks/${t.id}/streams/output`;
    const flushedBefore = (await stored(own.db, t.id, t.fence)).length;
    const staying = await sseConnect(url, { token: ownReadToken });
    const leaving = await sseConnect(url, { token: ownReadToken });
    await eventually('both readers have the first half', async () => [staying, leaving].every((r) => chunksOf(r.events()).length === flushedBefore));

    const { url: serverUrl } = ownServer;
    await ownServer.stop();
    // One reader goes while the database is down; the writer writes the second half, which finds no database.
    await leaving.close();
    checkpoint.answer();
    await eventually('a stream write found no database', async () => agent.output().includes('stream write: database unreachable'), 30_000)
      .catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
    ownServer = await embeddedServerStart({ dataDir, database: 'streams_restart', ephemeral: true });
    // The port file brings it back where it was: the agent and the HTTP server reach it again.
    expect(ownServer).toMatchObject({ owned: true, url: serverUrl });

    const resumed = await sseConnect(url, { token: ownReadToken, lastEventId: String(chunksOf(leaving.events()).at(-1)!.seq) });
    await eventually('the task completed', async () => (await taskOf(own.db, dagId).catch(() => undefined))?.status === 'completed', 60_000)
      .catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
    await Promise.all([staying.done(), resumed.done()]);
    const all = await stored(own.db, t.id, t.fence);
    expect(all.map((c) => c.text).join('')).toBe(lines(1, 1, LINES));
    expect(numbered(all)).toBe(true);
    expect(chunksOf(staying.events())).toEqual(all);
    expect([...chunksOf(leaving.events()), ...chunksOf(resumed.events())]).toEqual(all);
    for (const r of [staying, resumed]) expect(endOf(r.events())).toMatchObject({ reason: 'ended', chunks: all.length });
    // One attempt: the outage cost latency, not the attempt.
    expect(await taskOf(own.db, dagId)).toMatchObject({ attempts: 1 });
  }, TEST_TIMEOUT_MS);
});

describe('a stream write whose reply is lost', () => {
  it('is sent again on a new connection and written once: the stream holds each line once, and a reader has them once, in order', async () => {
    const checkpoint = holds.hold('/checkpoint/1');
    const dagId = await dagCreate(db, DAG(`{ lines: ${LINES}, holdAt: ${HOLD_AT} }`));
    const agent = await agentThroughProxy(STREAMER, 'streamer-muted');
    await checkpoint.arrived;
    const t = (await taskOf(db, dagId))!;
    const reader = await sseConnect(`${http.url}/api/tasks/${t.id}/streams/output`, { token: readToken });
    const flushedBefore = (await stored(db, t.id, t.fence)).length;
    // From now on the database's answers to the agent are lost, and what it sends still commits.
    proxy.set('mute');
    try {
      checkpoint.answer();
      await eventually('a batch committed without its reply', async () => (await stored(db, t.id, t.fence)).length > flushedBefore, 30_000)
        .catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
      // The connections break (a reset) and the network is back: the batch is sent again on a new connection.
      proxy.set('drop');
    } finally {
      proxy.set('pass');
    }
    await eventually('the task completed', async () => (await taskOf(db, dagId))?.status === 'completed', 60_000)
      .catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
    await reader.done();
    const all = await stored(db, t.id, t.fence);
    expect(all.map((c) => c.text).join('')).toBe(lines(1, 1, LINES));
    expect(numbered(all)).toBe(true);
    expect(chunksOf(reader.events())).toEqual(all);
    expect(endOf(reader.events())).toMatchObject({ reason: 'ended', chunks: all.length });
    expect(agent.output()).toContain('stream write: database unreachable, retrying');
    expect(await taskOf(db, dagId)).toMatchObject({ attempts: 1 });
  }, TEST_TIMEOUT_MS);
});
