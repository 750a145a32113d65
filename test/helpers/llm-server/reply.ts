import type { ServerResponse } from 'node:http';
import type { SeenRequest } from './index.js';

/**
 * What a scripted model answers, said once and rendered in whichever protocol the request speaks (OpenAI chat
 * completions, OpenAI Responses, Anthropic Messages, Google generateContent), streamed when the request asks for a
 * stream. One script can so be replayed over every provider.
 */

/**
 * Token counts as the AI SDK reports them: `input` counts every input token, the cached ones included. Each protocol
 * writes them its own way (Anthropic's `input_tokens` leaves out the cache's reads and writes; OpenAI and Google
 * count them in).
 */
export interface Usage { input: number; output: number; cacheRead?: number; cacheWrite?: number; reasoning?: number }

export type Part =
  | { type: 'text'; text: string }
  /** A call of a tool the request offered; `id` is made up per request when absent (Google sends none). */
  | { type: 'toolCall'; name: string; input: unknown; id?: string }
  /** The model declines: OpenAI's refusal content, Anthropic's `refusal` stop, Google's SAFETY block. */
  | { type: 'refusal'; text: string };

/** Why the answer ended, in the AI SDK's words; each protocol says it its own way (finish_reason, stop_reason, …). */
export type Finish = 'stop' | 'length' | 'tool-calls' | 'content-filter';

/** What a stream does besides answering; counted in events (SSE frames) the server writes. */
export interface StreamFault {
  /** The connection is closed mid-body after this many events: the client sees the answer end mid-way. */
  cutAfter?: number;
  /** Nothing more is sent after this many events, and the connection stays open (for idle timeouts). */
  stallAfter?: number;
  /** After this many events the provider's own in-stream error event (`failure`), then the stream ends. */
  failAfter?: { events: number; failure: FailureKind };
}

export interface Answer {
  kind: 'answer';
  parts: Part[];
  usage: Usage;
  finish: Finish;
  /** The model name the answer reports; the request's when absent. */
  model?: string;
  /** How many characters each streamed text delta carries at most (words are kept whole when they fit). */
  chunkChars: number;
  stream: StreamFault;
}

/** The errors every provider has, each rendered as that provider phrases it (status, body, headers). */
export type FailureKind = 'rate_limit' | 'auth' | 'context_length' | 'overloaded' | 'server';

export interface Failure {
  kind: 'failure';
  failure: FailureKind;
  /** rate_limit: the Retry-After header, in seconds. */
  retryAfterSec?: number;
  /** Replaces the provider's usual message. */
  message?: string;
  /** Extra response headers. */
  headers?: Record<string, string>;
}

/** A reply written by hand: the test answers the request itself (a protocol's exact bytes, or never). */
export interface Raw { kind: 'raw'; handle: (req: SeenRequest, res: ServerResponse) => void }

export type Reply = Answer | Failure | Raw;

export interface AnswerOptions {
  usage?: Usage;
  finish?: Finish;
  model?: string;
  chunkChars?: number;
}

const USAGE_DEFAULT: Usage = { input: 10, output: 5 };
const CHUNK_CHARS_DEFAULT = 8;

function finishOf(parts: Part[]): Finish {
  if (parts.some((p) => p.type === 'toolCall')) return 'tool-calls';
  if (parts.some((p) => p.type === 'refusal')) return 'content-filter';
  return 'stop';
}

/** Builders of a model's answers. */
export const answer = {
  /** Any mix of text, tool calls and refusals, in order. */
  parts(parts: Part[], o: AnswerOptions = {}): Answer {
    return {
      kind: 'answer', parts, usage: o.usage ?? USAGE_DEFAULT, finish: o.finish ?? finishOf(parts), model: o.model,
      chunkChars: o.chunkChars ?? CHUNK_CHARS_DEFAULT, stream: {},
    };
  },
  text(text: string, o: AnswerOptions = {}): Answer {
    return answer.parts([{ type: 'text', text }], o);
  },
  /** One tool call (finish: tool-calls). */
  toolCall(name: string, input: unknown, o: AnswerOptions & { id?: string } = {}): Answer {
    return answer.parts([{ type: 'toolCall', name, input, ...(o.id === undefined ? {} : { id: o.id }) }], o);
  },
  /** Several tool calls in one answer (parallel calls). */
  toolCalls(calls: { name: string; input: unknown; id?: string }[], o: AnswerOptions = {}): Answer {
    return answer.parts(calls.map((c) => ({ type: 'toolCall' as const, ...c })), o);
  },
  refusal(text: string, o: AnswerOptions = {}): Answer {
    return answer.parts([{ type: 'refusal', text }], o);
  },
};

/** Builders of provider errors and broken streams. */
export const fault = {
  /** 429 with Retry-After (seconds). */
  rateLimited: (retryAfterSec?: number, o: Omit<Failure, 'kind' | 'failure' | 'retryAfterSec'> = {}): Failure =>
    ({ kind: 'failure', failure: 'rate_limit', ...(retryAfterSec === undefined ? {} : { retryAfterSec }), ...o }),
  /** A key refused: 401 (Google says 400 API_KEY_INVALID, as it really does). */
  unauthorized: (o: Omit<Failure, 'kind' | 'failure'> = {}): Failure => ({ kind: 'failure', failure: 'auth', ...o }),
  /** 400: the prompt does not fit the model's context window. */
  contextTooLong: (o: Omit<Failure, 'kind' | 'failure'> = {}): Failure => ({ kind: 'failure', failure: 'context_length', ...o }),
  /** The provider is overloaded: Anthropic's 529, OpenAI's and Google's 503. */
  overloaded: (o: Omit<Failure, 'kind' | 'failure'> = {}): Failure => ({ kind: 'failure', failure: 'overloaded', ...o }),
  /** 500. */
  serverError: (o: Omit<Failure, 'kind' | 'failure'> = {}): Failure => ({ kind: 'failure', failure: 'server', ...o }),
  /** The answer's stream is cut (connection closed mid-body) after `events` events; a non-streamed answer after half its body. */
  cut: (a: Answer, events: number): Answer => ({ ...a, stream: { ...a.stream, cutAfter: events } }),
  /** The answer's stream goes silent after `events` events, the connection open. */
  stall: (a: Answer, events: number): Answer => ({ ...a, stream: { ...a.stream, stallAfter: events } }),
  /** The answer's stream carries the provider's in-stream error event after `events` events. */
  failMidStream: (a: Answer, events: number, failure: FailureKind = 'overloaded'): Answer =>
    ({ ...a, stream: { ...a.stream, failAfter: { events, failure } } }),
  /** Never answers (the request stays open until the client gives up or the server closes). */
  hang: (): Raw => ({ kind: 'raw', handle: () => {} }),
};

/** Replies written by hand. */
export const raw = {
  /** Any status and JSON body. */
  json: (status: number, body: unknown, headers: Record<string, string> = {}): Raw =>
    ({ kind: 'raw', handle: (_req, res) => { res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body)); } }),
  handle: (handle: Raw['handle']): Raw => ({ kind: 'raw', handle }),
};

/** `text` in streamed deltas of at most `max` characters, cut after a space when one is in reach. */
export function textPieces(text: string, max: number): string[] {
  const pieces: string[] = [];
  let rest = text;
  while (rest.length > max) {
    const space = rest.lastIndexOf(' ', max);
    const end = space > 0 ? space : max;
    pieces.push(rest.slice(0, end));
    rest = rest.slice(end);
  }
  if (rest.length > 0 || pieces.length === 0) pieces.push(rest);
  return pieces;
}

/** A tool call's JSON arguments in streamed deltas (cut anywhere, as providers do). */
export function jsonPieces(json: string, max: number): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < json.length; i += max) pieces.push(json.slice(i, i + max));
  return pieces.length > 0 ? pieces : [''];
}
