import http, { type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChatMessage } from '../../agents/llm.js';

/** One request the stand-in provider received. */
export interface SeenRequest {
  path: string; authorization: string | undefined; headers: IncomingHttpHeaders; model: string; messages: ChatMessage[]; body: Record<string, unknown>; res: ServerResponse;
}

/**
 * A local stand-in provider for tests: records every request in `seen` and answers with whatever the test sets as
 * `reply`. It speaks whichever protocol the test's replies do: OpenAI chat completions (llmCompletion, at
 * `<baseUrl>/chat/completions`), Anthropic Messages (anthropicMessage, `<origin>/v1/messages`) or Google's
 * generateContent (googleContent, `<origin>/v1beta/models/{model}:generateContent`, the model only in the path).
 */
export async function llmServerStart() {
  const state = {
    seen: [] as SeenRequest[],
    reply: (_req: SeenRequest): void => {},
    /** `<origin>/v1`: OpenAI's and Anthropic's base URL. */
    baseUrl: '',
    origin: '',
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
  const server = http.createServer((req, res) => {
    let data = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => { data += c; });
    req.on('end', () => {
      const body = JSON.parse(data) as { model: string; messages: ChatMessage[] } & Record<string, unknown>;
      const s = { path: req.url ?? '', authorization: req.headers.authorization, headers: req.headers, model: body.model, messages: body.messages, body, res };
      state.seen.push(s);
      state.reply(s);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.baseUrl = `${state.origin}/v1`;
  return state;
}

export function llmSend(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

/** A chat.completion body answering `text`, with token usage (`cached`: of the input, those OpenAI's prompt cache served). */
export function llmCompletion(text: string | null, input: number, output: number, cached?: number) {
  return {
    id: 'c1', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: text } }],
    usage: { prompt_tokens: input, completion_tokens: output, ...(cached === undefined ? {} : { prompt_tokens_details: { cached_tokens: cached } }) },
  };
}

/** An Anthropic Messages answer (POST /v1/messages): `input` excludes the cache's parts, as Anthropic counts them. */
export function anthropicMessage(text: string, usage: { input: number; output: number; cacheRead?: number; cacheWrite?: number }) {
  return {
    id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-test', content: [{ type: 'text', text }], stop_reason: 'end_turn', stop_sequence: null,
    usage: { input_tokens: usage.input, output_tokens: usage.output, cache_creation_input_tokens: usage.cacheWrite ?? 0, cache_read_input_tokens: usage.cacheRead ?? 0 },
  };
}

/** Anthropic's error body (`type`: rate_limit_error, authentication_error, …). */
export const anthropicError = (type: string, message: string) => ({ type: 'error', error: { type, message } });

/** A Google generateContent answer: `prompt` counts every input token, the cached ones included, as Google counts them. */
export function googleContent(text: string, usage: { prompt: number; candidates: number; cached?: number }) {
  return {
    candidates: [{ content: { role: 'model', parts: [{ text }] }, finishReason: 'STOP', index: 0 }],
    usageMetadata: {
      promptTokenCount: usage.prompt, candidatesTokenCount: usage.candidates, totalTokenCount: usage.prompt + usage.candidates,
      ...(usage.cached === undefined ? {} : { cachedContentTokenCount: usage.cached }),
    },
    modelVersion: 'gemini-test',
  };
}

/** Google's error body. */
export const googleError = (code: number, status: string, message: string) => ({ error: { code, status, message } });
