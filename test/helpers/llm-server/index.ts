import http, { type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChatMessage } from '../../../agents/llm.js';
import { anthropicWire } from './anthropic.js';
import { googleWire } from './google.js';
import { openaiChatWire } from './openai-chat.js';
import { openaiResponsesWire } from './openai-responses.js';
import { raw, type Reply } from './reply.js';
import { sendBody, sendFrames, sendJson, type Wire, type WireContext } from './wire.js';

export { answer, fault, raw, type Answer, type Failure, type FailureKind, type Finish, type Part, type Reply, type Usage } from './reply.js';

/** The provider protocols the server speaks, told apart by the request's path. */
export type Protocol = 'openai-chat' | 'openai-responses' | 'anthropic' | 'google';

const WIRES: Record<Protocol, Wire> = { 'openai-chat': openaiChatWire, 'openai-responses': openaiResponsesWire, anthropic: anthropicWire, google: googleWire };

/** One request the stand-in provider received. */
export interface SeenRequest {
  /** The path with its query (`/v1beta/models/gemini-test:streamGenerateContent?alt=sse`). */
  path: string;
  protocol: Protocol | undefined;
  /** Whether the request asked for a stream (`stream: true`, or Google's streamGenerateContent). */
  stream: boolean;
  authorization: string | undefined;
  headers: IncomingHttpHeaders;
  /** The model named in the body, or for Google in the path. */
  model: string;
  /** The body's `messages` (chat completions, Anthropic); empty for the protocols that name them otherwise. */
  messages: ChatMessage[];
  body: Record<string, unknown>;
  res: ServerResponse;
}

/**
 * A scripted reply, or a function of the request returning one; a function may instead answer through `req.res`
 * itself (or never), and what it returns then is not a reply and is ignored.
 */
export type Scripted = Reply | ((req: SeenRequest) => unknown);

const isReply = (x: unknown): x is Reply => typeof x === 'object' && x !== null && ['answer', 'failure', 'raw'].includes((x as { kind?: string }).kind ?? '');

function protocolOf(pathname: string): { protocol: Protocol; googleModel?: string; googleStream?: boolean } | undefined {
  if (pathname.endsWith('/chat/completions')) return { protocol: 'openai-chat' };
  if (pathname.endsWith('/responses')) return { protocol: 'openai-responses' };
  if (pathname.endsWith('/messages')) return { protocol: 'anthropic' };
  const google = /\/models\/([^:]+):(generateContent|streamGenerateContent)$/.exec(pathname);
  if (google) return { protocol: 'google', googleModel: google[1]!, googleStream: google[2] === 'streamGenerateContent' };
  return undefined;
}

/**
 * A local stand-in provider for tests, speaking the real wire protocols of OpenAI's chat completions
 * (`<baseUrl>/chat/completions`, which OpenAI-compatible servers speak too), OpenAI's Responses API
 * (`<baseUrl>/responses`), Anthropic's Messages (`<baseUrl>/messages`) and Google's generateContent and
 * streamGenerateContent (`<origin>/v1beta/models/{model}:…`), each streamed when the request asks.
 *
 * Each request takes the next reply of the script (`script([...])`), rendered in the request's protocol; when the
 * script is spent, `reply(req)` answers (by default a 500 saying no reply was scripted). Every request is kept in `seen`.
 */
export async function llmServerStart() {
  let served = 0;
  const state = {
    seen: [] as SeenRequest[],
    /** Replies still to give, in order. */
    queue: [] as Scripted[],
    /** What answers once the script is spent: a reply, or a function answering through `req.res` itself (as Scripted). */
    reply: unscripted as (req: SeenRequest) => unknown,
    /** `<origin>/v1`: OpenAI's and Anthropic's base URL. */
    baseUrl: '',
    /** `<origin>/v1beta`: Google's base URL. */
    googleBaseUrl: '',
    origin: '',
    /** The replies the next requests get, one each, in order (replacing what was left of an earlier script). */
    script(replies: Scripted[]) {
      state.queue = [...replies];
    },
    /** Forgets what was seen and scripted. */
    reset() {
      state.seen = [];
      state.queue = [];
      state.reply = unscripted;
    },
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
  const server = http.createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => { text += c; });
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://stand-in');
      const found = protocolOf(url.pathname);
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(text) as Record<string, unknown>;
      } catch {
        body = { unparsed: text };
      }
      const seen: SeenRequest = {
        path: req.url ?? '', protocol: found?.protocol, stream: found?.googleStream ?? body.stream === true,
        authorization: req.headers.authorization, headers: req.headers, model: found?.googleModel ?? String(body.model ?? ''),
        messages: Array.isArray(body.messages) ? (body.messages as ChatMessage[]) : [], body, res,
      };
      state.seen.push(seen);
      const next = state.queue.shift();
      const reply = next === undefined ? state.reply(seen) : typeof next === 'function' ? next(seen) : next;
      if (isReply(reply)) render(reply, seen, { model: seen.model, n: ++served, body });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.baseUrl = `${state.origin}/v1`;
  state.googleBaseUrl = `${state.origin}/v1beta`;
  return state;
}

export type LlmServer = Awaited<ReturnType<typeof llmServerStart>>;

/** The default once the script is spent: a 500 naming the request, so a missing reply fails the test loudly. */
function unscripted(req: SeenRequest): Reply {
  return raw.json(500, { error: { message: `the test scripted no reply for request ${req.path}`, type: 'server_error', code: 'unscripted' } });
}

function render(reply: Reply, req: SeenRequest, ctx: WireContext): void {
  const { res } = req;
  if (reply.kind === 'raw') return reply.handle(req, res);
  if (!req.protocol) return sendJson(res, 404, { error: { message: `no provider protocol at ${req.path}` } });
  const wire = WIRES[req.protocol];
  try {
    if (reply.kind === 'failure') {
      const inStream = req.stream ? wire.streamedFailure?.(reply, ctx) : undefined;
      if (inStream) return sendFrames(res, inStream, {}, wire, ctx);
      const e = wire.failure(reply, ctx);
      return sendJson(res, e.status, e.body, e.headers);
    }
    if (req.stream) sendFrames(res, wire.frames(reply, ctx), reply.stream, wire, ctx);
    else sendBody(res, wire.body(reply, ctx), reply.stream);
  } catch (err) {
    // A reply the renderer refuses (usage that does not add up): the test sees why in the SDK's error.
    sendJson(res, 500, { error: { message: `llm-server: ${(err as Error).message}`, type: 'server_error', code: 'bad_script' } });
  }
}
