import { ResourceTemplate, type McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { Db } from '../db/handle.js';
import { STREAM_NAME_DEFAULT } from '../engine/attempt/streams.js';
import { streamPageRead } from '../engine/read/streams.js';
import { InvalidInputError } from '../errors.js';
import { STREAM_DEFAULTS } from '../config/index.js';
import { streamNameSchema } from '../wire/streams.js';
import { toolResult } from './results.js';

/** Largest position or attempt number a reader may name (as the SSE route's query). */
const POSITION_MAX = 2_000_000_000;

/**
 * A task's stream as a reader's session reads it (read, submit and admin tokens): what was written so far, from a
 * position, as the resource `dagent://tasks/{task_id}/streams/{name}` (`?from=N`, `?attempt=N`) and the tool
 * `stream_read` for a harness that reads no resources. Each read answers at once (up to STREAM_DEFAULTS.readBytes)
 * and says where to read on from; following it live is the SSE route's (`GET /api/tasks/:id/streams/:name`).
 * `reach` refuses, as a task that does not exist, one of a tenant the session's token does not reach.
 */
export function streamReadsRegister(server: McpServer, db: Db, reach: (taskId: string) => Promise<void>): void {
  server.registerResource('task-stream', new ResourceTemplate('dagent://tasks/{task_id}/streams/{name}', { list: undefined }), {
    title: 'A task\'s stream',
    description: `What a task's attempt wrote to a stream so far, as JSON: its text, its JSON items, and where to read on from (add ?from=N for what came after chunk N, ?attempt=N for an earlier attempt's; up to ${STREAM_DEFAULTS.readBytes} bytes a read)`,
    mimeType: 'application/json',
  }, async (uri, vars) => {
    // The template's last variable takes the query too: the name is what comes before it.
    const name = String(vars.name).split('?')[0]!;
    const number = (field: string, min: number) => {
      const raw = uri.searchParams.get(field);
      if (raw === null) return undefined;
      const n = Number(raw);
      if (!/^\d{1,10}$/.test(raw) || n < min || n > POSITION_MAX) throw new InvalidInputError(`${field} ${JSON.stringify(raw)}: expected a whole number from ${min}`, { field });
      return n;
    };
    await reach(String(vars.task_id));
    const page = await streamPage(db, String(vars.task_id), name, number('from', 0), number('attempt', 1));
    return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(page, null, 2) }] };
  });

  server.registerTool('stream_read', {
    title: 'Read a task\'s stream',
    description: [
      'What a task\'s attempt wrote to a stream so far (a draft, progress as it works): its text, its JSON items',
      `(each with its seq), up to ${STREAM_DEFAULTS.readBytes} bytes a read. more: more was written; read again with`,
      'from set to the answer\'s to. end set: the stream has ended (reason ended, truncated or attempt_ended, with its outcome).',
    ].join(' '),
    inputSchema: {
      task_id: z.string().max(64),
      name: streamNameSchema.optional().describe(`the stream (default ${STREAM_NAME_DEFAULT})`),
      from: z.number().int().min(0).max(POSITION_MAX).optional().describe('what came after this chunk (the last answer\'s to); default 0: from the start'),
      attempt: z.number().int().min(1).max(POSITION_MAX).optional().describe('that attempt\'s stream (default the latest attempt\'s)'),
    },
  }, (a) => toolResult(async () => (await reach(a.task_id), streamPage(db, a.task_id, a.name ?? STREAM_NAME_DEFAULT, a.from, a.attempt))));
}

async function streamPage(db: Db, taskId: string, name: string, from = 0, attempt?: number) {
  const checked = streamNameSchema.safeParse(name);
  if (!checked.success) throw new InvalidInputError(`name ${JSON.stringify(name)}: ${checked.error.issues[0]!.message}`, { field: 'name' });
  const p = await streamPageRead(db, taskId, name, { afterSeq: from, attempt });
  return {
    task_id: taskId, name, attempt: p.stream.attempt, from, to: p.last,
    text: p.chunks.filter((c) => c.kind === 'text').map((c) => c.data).join(''),
    json: p.chunks.filter((c) => c.kind === 'json').map((c) => ({ seq: c.seq, json: JSON.parse(c.data) as unknown })),
    more: p.more,
    end: p.end && { reason: p.end.reason, outcome: p.end.outcome },
  };
}
