import { jsonPieces, textPieces, type Answer, type Failure, type FailureKind, type Finish, type Part, type Usage } from './reply.js';
import { data, type ErrorAnswer, type Frame, type Wire, type WireContext } from './wire.js';

/**
 * OpenAI's chat completions (`POST …/chat/completions`), which OpenAI-compatible servers (vLLM, Ollama, LiteLLM)
 * speak too: a `chat.completion` body, or with `stream: true` `chat.completion.chunk` events ending in `data: [DONE]`,
 * the usage in a last chunk without choices when the request sets `stream_options.include_usage`.
 */

const CREATED = 1_700_000_000;

export function openaiChatUsage(u: Usage) {
  return {
    prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.input + u.output,
    prompt_tokens_details: { cached_tokens: u.cacheRead ?? 0, audio_tokens: 0, ...(u.cacheWrite === undefined ? {} : { cache_write_tokens: u.cacheWrite }) },
    completion_tokens_details: { reasoning_tokens: u.reasoning ?? 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
}

/** OpenAI ends a refusal with finish_reason `stop`, the refusal field saying why. */
function finishReason(finish: Finish, parts: Part[]): string {
  switch (finish) {
    case 'stop': return 'stop';
    case 'length': return 'length';
    case 'tool-calls': return 'tool_calls';
    case 'content-filter': return parts.some((p) => p.type === 'refusal') ? 'stop' : 'content_filter';
  }
}

function toolCalls(parts: Part[], n: number) {
  return parts.flatMap((p) => (p.type === 'toolCall' ? [p] : [])).map((p, i) => ({ id: p.id ?? `call_${n}_${i}`, name: p.name, arguments: JSON.stringify(p.input) }));
}

const joined = (parts: Part[], type: 'text' | 'refusal') => {
  const texts = parts.flatMap((p) => (p.type === type ? [p.text] : []));
  return texts.length > 0 ? texts.join('') : null;
};

function body(a: Answer, ctx: WireContext) {
  const calls = toolCalls(a.parts, ctx.n);
  return {
    id: `chatcmpl-${ctx.n}`, object: 'chat.completion', created: CREATED, model: a.model ?? ctx.model, system_fingerprint: 'fp_test',
    choices: [{
      index: 0,
      message: {
        role: 'assistant', content: joined(a.parts, 'text'), refusal: joined(a.parts, 'refusal'), annotations: [],
        ...(calls.length === 0 ? {} : { tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) }),
      },
      logprobs: null, finish_reason: finishReason(a.finish, a.parts),
    }],
    usage: openaiChatUsage(a.usage), service_tier: 'default',
  };
}

function frames(a: Answer, ctx: WireContext): Frame[] {
  const withUsage = (ctx.body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => data({
    id: `chatcmpl-${ctx.n}`, object: 'chat.completion.chunk', created: CREATED, model: a.model ?? ctx.model, system_fingerprint: 'fp_test',
    choices, ...(withUsage ? { usage: null } : {}), ...extra,
  });
  const delta = (d: Record<string, unknown>, finish: string | null = null) => chunk([{ index: 0, delta: d, logprobs: null, finish_reason: finish }]);
  const out: Frame[] = [delta({ role: 'assistant', content: '', refusal: null })];
  let call = 0;
  for (const p of a.parts) {
    if (p.type === 'text') out.push(...textPieces(p.text, a.chunkChars).map((t) => delta({ content: t })));
    else if (p.type === 'refusal') out.push(...textPieces(p.text, a.chunkChars).map((t) => delta({ refusal: t })));
    else {
      const index = call++;
      out.push(delta({ tool_calls: [{ index, id: p.id ?? `call_${ctx.n}_${index}`, type: 'function', function: { name: p.name, arguments: '' } }] }));
      out.push(...jsonPieces(JSON.stringify(p.input), a.chunkChars).map((args) => delta({ tool_calls: [{ index, function: { arguments: args } }] })));
    }
  }
  out.push(delta({}, finishReason(a.finish, a.parts)));
  if (withUsage) out.push(chunk([], { usage: openaiChatUsage(a.usage) }));
  out.push({ data: '[DONE]' });
  return out;
}

/** OpenAI's error bodies and headers; the Responses API answers with the same ones. */
export function openaiFailure(f: Failure, ctx: WireContext, param = 'messages'): ErrorAnswer {
  const error = (status: number, message: string, type: string, code: string | null, p: string | null = null, headers: Record<string, string> = {}) =>
    ({ status, body: { error: { message: f.message ?? message, type, param: p, code } }, headers: { 'x-request-id': `req_${ctx.n}`, ...headers, ...f.headers } });
  switch (f.failure) {
    case 'rate_limit':
      return error(429, `Rate limit reached for ${ctx.model} in organization org-test on tokens per min (TPM): Limit 30000, Used 29500, Requested 1200. Please try again in ${f.retryAfterSec ?? 1}s. Visit https://platform.openai.com/account/rate-limits to learn more.`,
        'tokens', 'rate_limit_exceeded', null, f.retryAfterSec === undefined ? {} : { 'retry-after': String(f.retryAfterSec), 'x-ratelimit-remaining-tokens': '0' });
    case 'auth':
      return error(401, 'Incorrect API key provided: sk-test***. You can find your API key at https://platform.openai.com/account/api-keys.', 'invalid_request_error', 'invalid_api_key');
    case 'context_length':
      return param === 'input'
        ? error(400, 'Your input exceeds the context window of this model. Please adjust your input and try again.', 'invalid_request_error', 'context_length_exceeded', 'input')
        : error(400, "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.", 'invalid_request_error', 'context_length_exceeded', 'messages');
    case 'overloaded':
      return error(503, 'The server is overloaded or not ready yet.', 'server_error', null);
    case 'server':
      return error(500, 'The server had an error while processing your request. Sorry about that!', 'server_error', null);
  }
}

/** What OpenAI sends inside a chat stream that fails after it began: an `error` object where a chunk would be. */
function streamError(kind: FailureKind, ctx: WireContext): Frame[] {
  const { body: b } = openaiFailure({ kind: 'failure', failure: kind }, ctx);
  return [data(b)];
}

export const openaiChatWire: Wire = { body, frames, failure: (f, ctx) => openaiFailure(f, ctx), streamError };
