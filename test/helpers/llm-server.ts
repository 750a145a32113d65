import http, { type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChatMessage } from '../../agents/llm.js';

/** One request the stand-in provider received. */
export interface SeenRequest { path: string; authorization: string | undefined; model: string; messages: ChatMessage[]; body: Record<string, unknown>; res: ServerResponse }

/**
 * A local OpenAI-compatible chat-completions server for tests: records every
 * request in `seen` and answers with whatever the test sets as `reply`.
 */
export async function llmServerStart() {
  const state = {
    seen: [] as SeenRequest[],
    reply: (_req: SeenRequest): void => {},
    baseUrl: '',
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
  const server = http.createServer((req, res) => {
    let data = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => { data += c; });
    req.on('end', () => {
      const body = JSON.parse(data) as { model: string; messages: ChatMessage[] } & Record<string, unknown>;
      const s = { path: req.url ?? '', authorization: req.headers.authorization, model: body.model, messages: body.messages, body, res };
      state.seen.push(s);
      state.reply(s);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
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
