import { jsonPieces, textPieces, type Answer, type Failure, type FailureKind, type Usage } from './reply.js';
import { openaiFailure } from './openai-chat.js';
import { data, type Frame, type Wire, type WireContext } from './wire.js';

/**
 * OpenAI's Responses API (`POST …/responses`): a `response` object whose `output` holds message and function_call
 * items, or with `stream: true` its typed events (response.created, response.output_item.added,
 * response.output_text.delta, response.function_call_arguments.delta, response.output_item.done,
 * response.completed), each with a `sequence_number`.
 */

const CREATED = 1_700_000_000;

const usageOf = (u: Usage) => ({
  input_tokens: u.input, input_tokens_details: { cached_tokens: u.cacheRead ?? 0 },
  output_tokens: u.output, output_tokens_details: { reasoning_tokens: u.reasoning ?? 0 }, total_tokens: u.input + u.output,
});

type Item =
  | { type: 'message'; id: string; status: string; role: 'assistant'; content: ({ type: 'output_text'; text: string; annotations: []; logprobs: [] } | { type: 'refusal'; refusal: string })[] }
  | { type: 'function_call'; id: string; call_id: string; name: string; arguments: string; status: string };

/** Each text or refusal its own message item, each tool call a function_call item, in the answer's order. */
function items(a: Answer, n: number): Item[] {
  return a.parts.map((p, i): Item => {
    if (p.type === 'toolCall') return { type: 'function_call', id: `fc_${n}_${i}`, call_id: p.id ?? `call_${n}_${i}`, name: p.name, arguments: JSON.stringify(p.input), status: 'completed' };
    const content = p.type === 'text' ? { type: 'output_text' as const, text: p.text, annotations: [] as [], logprobs: [] as [] } : { type: 'refusal' as const, refusal: p.text };
    return { type: 'message', id: `msg_${n}_${i}`, status: 'completed', role: 'assistant', content: [content] };
  });
}

/** A cut-short answer is `incomplete`, saying why; every other one `completed` (tool calls and refusals included). */
function ending(a: Answer) {
  if (a.finish === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (a.finish === 'content-filter' && !a.parts.some((p) => p.type === 'refusal')) return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

function response(a: Answer, ctx: WireContext, state: { status: string; incomplete_details: unknown }, output: Item[], usage: unknown) {
  return {
    id: `resp_${ctx.n}`, object: 'response', created_at: CREATED, ...state, error: null, instructions: null, max_output_tokens: null,
    model: a.model ?? ctx.model, output, parallel_tool_calls: true, previous_response_id: null, reasoning: { effort: null, summary: null },
    store: true, temperature: 1, text: { format: { type: 'text' } }, tool_choice: 'auto', tools: [], top_p: 1, truncation: 'disabled',
    usage, user: null, metadata: {},
  };
}

const body = (a: Answer, ctx: WireContext) => response(a, ctx, ending(a), items(a, ctx.n), usageOf(a.usage));

/** The events' common opening: the response created and in progress. */
function opening(a: Answer, ctx: WireContext, ev: (type: string, fields: Record<string, unknown>) => Frame): Frame[] {
  const started = response(a, ctx, { status: 'in_progress', incomplete_details: null }, [], null);
  return [ev('response.created', { response: started }), ev('response.in_progress', { response: started })];
}

function sequencer() {
  let sequence = 0;
  return (type: string, fields: Record<string, unknown>) => data({ type, sequence_number: sequence++, ...fields }, type);
}

function frames(a: Answer, ctx: WireContext): Frame[] {
  const ev = sequencer();
  const out = opening(a, ctx, ev);
  const done = items(a, ctx.n);
  done.forEach((item, output_index) => {
    if (item.type === 'function_call') {
      out.push(ev('response.output_item.added', { output_index, item: { ...item, arguments: '', status: 'in_progress' } }));
      for (const delta of jsonPieces(item.arguments, a.chunkChars)) out.push(ev('response.function_call_arguments.delta', { item_id: item.id, output_index, delta }));
      out.push(ev('response.function_call_arguments.done', { item_id: item.id, output_index, arguments: item.arguments }));
    } else {
      const part = item.content[0]!;
      const at = { item_id: item.id, output_index, content_index: 0 };
      out.push(ev('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', content: [] } }));
      if (part.type === 'output_text') {
        out.push(ev('response.content_part.added', { ...at, part: { ...part, text: '' } }));
        for (const delta of textPieces(part.text, a.chunkChars)) out.push(ev('response.output_text.delta', { ...at, delta, logprobs: [] }));
        out.push(ev('response.output_text.done', { ...at, text: part.text, logprobs: [] }));
      } else {
        out.push(ev('response.content_part.added', { ...at, part: { type: 'refusal', refusal: '' } }));
        for (const delta of textPieces(part.refusal, a.chunkChars)) out.push(ev('response.refusal.delta', { ...at, delta }));
        out.push(ev('response.refusal.done', { ...at, refusal: part.refusal }));
      }
      out.push(ev('response.content_part.done', { ...at, part }));
    }
    out.push(ev('response.output_item.done', { output_index, item }));
  });
  const end = ending(a);
  out.push(ev(end.status === 'completed' ? 'response.completed' : 'response.incomplete', { response: response(a, ctx, end, done, usageOf(a.usage)) }));
  return out;
}

/** The `error` event a Responses stream carries when it fails after it began (the error nested, as OpenAI sends it). */
function errorEvent(f: Failure, ctx: WireContext, sequence: number): Frame {
  const { error } = openaiFailure(f, ctx, 'input').body as { error: Record<string, unknown> };
  return data({ type: 'error', sequence_number: sequence, error: { type: error.type, code: error.code, message: error.message, param: error.param } }, 'error');
}

/**
 * A streamed request whose prompt is too long is refused inside the stream: response.created, response.in_progress,
 * then an `error` event with code context_length_exceeded, all under status 200, as OpenAI does.
 */
function streamedFailure(f: Failure, ctx: WireContext): Frame[] | undefined {
  if (f.failure !== 'context_length') return undefined;
  const ev = sequencer();
  return [...opening({ kind: 'answer', parts: [], usage: { input: 0, output: 0 }, finish: 'stop', chunkChars: 1, stream: {} }, ctx, ev), errorEvent(f, ctx, 2)];
}

export const openaiResponsesWire: Wire = {
  body, frames, failure: (f, ctx) => openaiFailure(f, ctx, 'input'), streamError: (kind: FailureKind, ctx, sequence) => [errorEvent({ kind: 'failure', failure: kind }, ctx, sequence)], streamedFailure,
};
