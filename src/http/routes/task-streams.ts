import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { STREAM_NAME_DEFAULT, STREAM_SEQ_MAX, streamWrite } from '../../engine/attempt/streams.js';
import { streamList, streamOpen, type StreamChunk } from '../../engine/read/streams.js';
import { InvalidInputError } from '../../errors.js';
import { LIMITS, STREAM_DEFAULTS } from '../../config/index.js';
import { streamListAnswerSchema, streamNameSchema, streamWriteAnswerSchema, streamWriteBodyFields } from '../../wire/streams.js';
import { fence, holding } from '../task-holder.js';
import { otherContent, route } from '../route.js';
import type { HttpDeps } from '../deps.js';
import { sseKeepalive, sseOpen } from '../sse.js';
import type { StreamReader } from '../stream-feeds.js';

/**
 * Streams of a task (engine/attempt/streams.ts): written by its holder while the attempt runs, read live and
 * afterwards as server-sent events, each chunk's sequence its `id`, so a reader resumes after Last-Event-ID.
 */
/**
 * A chunk as one SSE event, made once per chunk: a feed hands the same chunk objects to every reader of the stream,
 * so 500 readers share one parse and one serialization (a WeakMap: gone with the read that made them).
 */
const frames = new WeakMap<StreamChunk, string>();
function chunkFrame(c: StreamChunk): string {
  let f = frames.get(c);
  if (f === undefined) {
    const data = c.kind === 'text' ? { seq: c.seq, text: c.data } : { seq: c.seq, json: JSON.parse(c.data) as unknown };
    frames.set(c, f = `id: ${c.seq}\nevent: chunk\ndata: ${JSON.stringify(data)}\n\n`);
  }
  return f;
}

export function taskStreamRoutes(app: FastifyInstance, d: HttpDeps): void {
  route(app, {
    method: 'POST', url: '/api/tasks/:id/streams/:name', access: 'agent', tenants: { task: ['id'] }, tag: 'agent protocol',
    body: z.strictObject({ fence, ...streamWriteBodyFields }),
    summary: 'Append to a stream of your attempt (in order, each batch once); 409 if the lease was lost',
    response: streamWriteAnswerSchema,
  }, async ({ params: p, body, principal }) => {
    const name = streamNameSchema.safeParse(p.name);
    if (!name.success) throw new InvalidInputError(`params.name: ${name.error.issues[0]!.message}`, { field: 'name' });
    await holding(d, principal, p.id!, body.fence);
    return streamWrite(d.db, { taskId: p.id!, fence: body.fence }, {
      name: name.data, fromSeq: body.from_seq, end: body.end,
      chunks: body.chunks.map((c) => ('text' in c ? { kind: 'text' as const, data: c.text } : { kind: 'json' as const, data: JSON.stringify(c.json ?? null) })),
    });
  });

  route(app, {
    method: 'GET', url: '/api/tasks/:id/streams', access: 'read', tenants: { task: ['id'] }, tag: 'stream',
    summary: 'A task\'s streams, each attempt\'s apart: how much each holds and how it ended (read one with GET /api/tasks/:id/streams/:name)',
    response: streamListAnswerSchema,
  }, async ({ params: p }) => ({ streams: await streamList(d.db, p.id!) }));

  route(app, {
    method: 'GET', url: '/api/tasks/:id/streams/:name', access: 'read', tenants: { task: ['id'] }, tag: 'stream',
    query: z.object({
      from: z.coerce.number().int().min(0).max(2_000_000_000).optional().describe('send the chunks after this sequence number (default 0: all); Last-Event-ID wins'),
      attempt: z.coerce.number().int().min(1).max(1_000_000).optional().describe('that attempt\'s stream (default the latest attempt\'s)'),
      fence: z.coerce.number().int().min(0).max(2_147_483_647).optional()
        .describe('that claim\'s stream exactly (GET /api/tasks/:id/streams lists each with its fence): attempt numbers repeat after a re-run; wins over attempt'),
    }),
    summary: 'Server-sent events: a stream\'s chunks (event chunk, id its sequence), live, resumable after Last-Event-ID; event end when it ends',
    response: otherContent(['text/event-stream'], 'events: stream (which attempt), chunk ({seq, text} or {seq, json}; id: seq), end ({reason: ended | truncated | attempt_ended, outcome}); the server closes after end'),
  }, async ({ req, reply, query, params: p, principal }) => {
    const name = streamNameSchema.safeParse(p.name ?? STREAM_NAME_DEFAULT);
    if (!name.success) throw new InvalidInputError(`params.name: ${name.error.issues[0]!.message}`, { field: 'name' });
    const lastEventId = req.headers['last-event-id'];
    // A chunk's sequence, as this stream sent it; anything else (or past any sequence) is ignored for `from`.
    const resumeAt = typeof lastEventId === 'string' && /^\d{1,10}$/.test(lastEventId.trim()) && Number(lastEventId) <= STREAM_SEQ_MAX ? Number(lastEventId) : undefined;
    // Resolved before the stream opens: an unknown task or stream is a 404, not an empty stream.
    const s = await streamOpen(d.db, p.id!, name.data, query.attempt, query.fence);
    reply.hijack();
    const res = reply.raw;
    // Gone while the stream was looked up: its close has fired already, so nothing would unregister a reader. (The
    // socket, not the request: a GET's request is destroyed once read, its connection still open.)
    if (res.destroyed || req.raw.socket.destroyed) return;
    sseOpen(res);
    res.write(`event: stream\ndata: ${JSON.stringify({ taskId: p.id, name: name.data, attempt: s.attempt, fence: s.fence })}\n\n`);
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      keepaliveStop();
      unwatch?.();
      void following.then((f) => f.stop());
      if (!res.writableEnded) res.end();
    };
    // What this reader's socket holds unsent is bounded: past LIMITS.streamBacklogBytes it stops (its position set
    // back to the last chunk sent) until the socket drains, then reads on from the database; a reader that has not
    // drained within STREAM_DEFAULTS.readerStallMs has fallen behind and is cut off at the next read (it resumes with
    // Last-Event-ID). The feed and other readers never wait for it.
    let sent = resumeAt ?? query.from ?? 0;
    let pausedAt: number | undefined;
    const behind = () => {
      d.log.warn({ taskId: p.id, stream: name.data, backlogBytes: res.writableLength }, 'stream reader fell too far behind; cutting it off');
      res.destroy();
      close();
    };
    const reader: StreamReader = {
      after: sent,
      send: (chunks) => {
        if (closed) return;
        if (pausedAt !== undefined) {
          if (Date.now() - pausedAt > STREAM_DEFAULTS.readerStallMs) behind();
          return;
        }
        for (const c of chunks) {
          if (c.seq <= sent) continue;
          res.write(chunkFrame(c));
          sent = c.seq;
          if (res.writableLength > LIMITS.streamBacklogBytes) {
            pausedAt = Date.now();
            reader.after = sent;
            res.once('drain', () => {
              pausedAt = undefined;
              void following.then((f) => f.wake());
            });
            return;
          }
        }
      },
      end: (e) => {
        if (closed) return;
        res.write(`event: end\ndata: ${JSON.stringify({ reason: e.reason, outcome: e.outcome, chunks: e.chunks })}\n\n`);
        close();
      },
    };
    const following = d.streams.follow({ taskId: p.id!, fence: s.fence, name: name.data }, reader);
    const keepaliveStop = sseKeepalive(res);
    // A token revoked while the stream is open ends it (auth/revocations.ts).
    const unwatch = principal ? d.revocations.watch(principal.tokenId, () => {
      if (!res.writableEnded) res.write(`event: close\ndata: ${JSON.stringify({ reason: 'token revoked' })}\n\n`);
      close();
    }) : undefined;
    req.raw.on('close', close);
    res.on('close', close);
  });
}
