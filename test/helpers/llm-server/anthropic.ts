import { jsonPieces, textPieces, type Answer, type Failure, type FailureKind, type Finish, type Usage } from './reply.js';
import { data, type ErrorAnswer, type Frame, type Wire, type WireContext } from './wire.js';

/**
 * Anthropic's Messages API (`POST …/v1/messages`): a `message` with text and tool_use blocks, or with `stream: true`
 * the events message_start, content_block_start, content_block_delta (text_delta, input_json_delta),
 * content_block_stop, message_delta (stop_reason and output usage) and message_stop.
 */

const STOP_REASON: Record<Finish, string> = { stop: 'end_turn', length: 'max_tokens', 'tool-calls': 'tool_use', 'content-filter': 'refusal' };

/** Anthropic's `input_tokens` counts only what the cache neither read nor wrote. */
function usageOf(u: Usage) {
  const uncached = u.input - (u.cacheRead ?? 0) - (u.cacheWrite ?? 0);
  if (uncached < 0) throw new Error(`usage: input (${u.input}) must count the cached tokens too (${u.cacheRead ?? 0} read, ${u.cacheWrite ?? 0} written)`);
  return { input_tokens: uncached, cache_creation_input_tokens: u.cacheWrite ?? 0, cache_read_input_tokens: u.cacheRead ?? 0, output_tokens: u.output, service_tier: 'standard' };
}

type Block = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: unknown };

/** A refusal's words are text: Anthropic says no with stop_reason `refusal`, not with a block of its own. */
function blocks(a: Answer, n: number): Block[] {
  return a.parts.flatMap((p, i): Block[] => {
    if (p.type === 'toolCall') return [{ type: 'tool_use', id: p.id ?? `toolu_${n}_${i}`, name: p.name, input: p.input }];
    return p.text === '' ? [] : [{ type: 'text', text: p.text }];
  });
}

function body(a: Answer, ctx: WireContext) {
  return {
    id: `msg_${ctx.n}`, type: 'message', role: 'assistant', model: a.model ?? ctx.model, content: blocks(a, ctx.n),
    stop_reason: STOP_REASON[a.finish], stop_sequence: null, usage: usageOf(a.usage),
  };
}

function frames(a: Answer, ctx: WireContext): Frame[] {
  const ev = (type: string, fields: Record<string, unknown> = {}) => data({ type, ...fields }, type);
  const usage = usageOf(a.usage);
  const out = [ev('message_start', {
    message: { id: `msg_${ctx.n}`, type: 'message', role: 'assistant', model: a.model ?? ctx.model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } },
  })];
  blocks(a, ctx.n).forEach((b, index) => {
    if (b.type === 'text') {
      out.push(ev('content_block_start', { index, content_block: { type: 'text', text: '' } }));
      if (index === 0) out.push(ev('ping'));
      for (const text of textPieces(b.text, a.chunkChars)) out.push(ev('content_block_delta', { index, delta: { type: 'text_delta', text } }));
    } else {
      out.push(ev('content_block_start', { index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } }));
      if (index === 0) out.push(ev('ping'));
      for (const partial_json of ['', ...jsonPieces(JSON.stringify(b.input), a.chunkChars)]) out.push(ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json } }));
    }
    out.push(ev('content_block_stop', { index }));
  });
  out.push(ev('message_delta', { delta: { stop_reason: STOP_REASON[a.finish], stop_sequence: null }, usage: { output_tokens: usage.output_tokens } }));
  out.push(ev('message_stop'));
  return out;
}

const ERRORS: Record<FailureKind, { status: number; type: string; message: string }> = {
  rate_limit: {
    status: 429, type: 'rate_limit_error',
    message: 'This request would exceed the rate limit for your organization (org-test) of 50,000 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later.',
  },
  auth: { status: 401, type: 'authentication_error', message: 'invalid x-api-key' },
  context_length: { status: 400, type: 'invalid_request_error', message: 'prompt is too long: 208310 tokens > 200000 maximum' },
  overloaded: { status: 529, type: 'overloaded_error', message: 'Overloaded' },
  server: { status: 500, type: 'api_error', message: 'Internal server error' },
};

function failure(f: Failure, ctx: WireContext): ErrorAnswer {
  const e = ERRORS[f.failure];
  const headers: Record<string, string> = { 'request-id': `req_${ctx.n}`, 'x-should-retry': String(e.status === 429 || e.status >= 500) };
  if (f.retryAfterSec !== undefined) Object.assign(headers, { 'retry-after': String(f.retryAfterSec), 'anthropic-ratelimit-input-tokens-remaining': '0' });
  return { status: e.status, body: { type: 'error', error: { type: e.type, message: f.message ?? e.message }, request_id: `req_${ctx.n}` }, headers: { ...headers, ...f.headers } };
}

/** Anthropic's `error` event, which it sends mid-stream when it gives up (most often overloaded_error). */
function streamError(kind: FailureKind): Frame[] {
  const e = ERRORS[kind];
  return [data({ type: 'error', error: { type: e.type, message: e.message } }, 'error')];
}

export const anthropicWire: Wire = { body, frames, failure, streamError };
