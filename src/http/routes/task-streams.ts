import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { STREAM_NAME_DEFAULT, STREAM_SEQ_MAX, streamWrite } from '../../engine/attempt/streams.js';
import { streamList, streamOpen } from '../../engine/read/streams.js';
import { InvalidInputError } from '../../errors.js';
import { LIMITS } from '../../config/index.js';
import { streamListAnswerSchema, streamNameSchema, streamWriteAnswerSchema, streamWriteBodyFields } from '../../wire/streams.js';
import { fence, holding } from '../task-holder.js';
import { otherContent, route } from '../route.js';
import type { HttpDeps } from '../deps.js';
import { sseKeepalive, sseOpen } from '../sse.js';

/**
 * Streams of a task (engine/attempt/streams.ts): written by its holder while the attempt runs, read live and
 * afterwards as server-sent events, each chunk's sequence its `id`, so a reader resumes after Last-Event-ID.
 */
export function taskStreamRoutes(app: FastifyInstance, d: HttpDeps): void {
  route(app, {
    method: 'POST', url: '/api/tasks/:id/streams/:name', access: 'agent', tag: 'agent protocol',
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
    method: 'GET', url: '/api/tasks/:id/streams', access: 'read', tag: 'stream',
    summary: 'A task\'s streams, each attempt\'s apart: how much each holds and how it ended (read one with GET /api/tasks/:id/streams/:name)',
    response: streamListAnswerSchema,
  }, async ({ params: p }) => ({ streams: await streamList(d.db, p.id!) }));

  route(app, {
    method: 'GET', url: '/api/tasks/:id/streams/:name', access: 'read', tag: 'stream',
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
    // Gone while the stream was looked up: its close has fired already, so nothing would unregister a reader.
    if (req.raw.destroyed || res.destroyed) return;
    sseOpen(res);
    res.write(`event: stream\ndata: ${JSON.stringify({ taskId: p.id, name: name.data, attempt: s.attempt, fence: s.fence })}\n\n`);
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      keepaliveStop();
      unwatch?.();
      void unfollow.then((f) => f());
      if (!res.writableEnded) res.end();
    };
    // A reader that does not read would make this process hold the stream for it: past LIMITS.streamBacklogBytes
    // unsent it is cut off (it resumes with Last-Event-ID, from the database). The feed and other readers never wait.
    const behind = () => {
      if (res.writableLength <= LIMITS.streamBacklogBytes) return false;
      d.log.warn({ taskId: p.id, stream: name.data, backlogBytes: res.writableLength }, 'stream reader fell too far behind; cutting it off');
      res.destroy();
      close();
      return true;
    };
    const unfollow = d.streams.follow({ taskId: p.id!, fence: s.fence, name: name.data }, {
      after: resumeAt ?? query.from ?? 0,
      send: (chunks) => {
        // Checked before each chunk, not each read: one read may hold 500 chunks (and escaped text grows up to 6×).
        for (const c of chunks) {
          if (closed || behind()) return;
          const data = c.kind === 'text' ? { seq: c.seq, text: c.data } : { seq: c.seq, json: JSON.parse(c.data) as unknown };
          res.write(`id: ${c.seq}\nevent: chunk\ndata: ${JSON.stringify(data)}\n\n`);
        }
      },
      end: (e) => {
        if (closed) return;
        res.write(`event: end\ndata: ${JSON.stringify({ reason: e.reason, outcome: e.outcome, chunks: e.chunks })}\n\n`);
        close();
      },
    });
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
