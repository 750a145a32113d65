import type { ServerResponse } from 'node:http';
import type { Answer, Failure, FailureKind, StreamFault } from './reply.js';

/** One server-sent event; `event` is the `event:` line Anthropic and OpenAI's Responses API send (chat and Google send none). */
export interface Frame { event?: string; data: string }

/** What a renderer knows of the request it answers. */
export interface WireContext {
  /** The model the request named (for Google, the one in its path). */
  model: string;
  /** The request's number on this server, from 1: tool-call and message ids are made from it so each is unique. */
  n: number;
  body: Record<string, unknown>;
}

export interface ErrorAnswer { status: number; body: unknown; headers?: Record<string, string> }

/** One provider protocol: how it writes an answer, streamed or not, and its errors. */
export interface Wire {
  /** The non-streamed answer's JSON body. */
  body: (a: Answer, ctx: WireContext) => unknown;
  /** The streamed answer's events, in order, the closing ones (`[DONE]`, message_stop) included. */
  frames: (a: Answer, ctx: WireContext) => Frame[];
  /** An error answer: its status, body and headers as the provider sends them. */
  failure: (f: Failure, ctx: WireContext) => ErrorAnswer;
  /**
   * A failure the provider reports inside a stream it has begun (status 200): what `fault.failMidStream` sends, and
   * (when `streamed` returns events) how a streamed request is refused, as OpenAI's Responses API refuses a prompt
   * too long for the context window.
   */
  streamError: (kind: FailureKind, ctx: WireContext, sequence: number) => Frame[];
  streamedFailure?: (f: Failure, ctx: WireContext) => Frame[] | undefined;
  /** The blank line ending each event: Google's servers end them with CRLF. */
  eol?: string;
}

export function frameText(f: Frame, eol = '\n'): string {
  return `${f.event === undefined ? '' : `event: ${f.event}${eol}`}data: ${f.data}${eol}${eol}`;
}

export const data = (value: unknown, event?: string): Frame => ({ ...(event === undefined ? {} : { event }), data: JSON.stringify(value) });

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

/**
 * Writes a non-streamed answer, honouring its stream fault as far as a single body can: cut sends half the body and
 * closes the connection, stall sends the headers and nothing more.
 */
export function sendBody(res: ServerResponse, body: unknown, fault: StreamFault): void {
  const text = JSON.stringify(body);
  if (fault.cutAfter === undefined && fault.stallAfter === undefined) return sendJson(res, 200, body);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
  if (fault.stallAfter !== undefined) return void res.flushHeaders();
  // Ended once the half is written to the socket: ended at once, Node 24 could drop what was still queued.
  res.write(text.slice(0, Math.floor(text.length / 2)), () => res.socket?.end());
}

/**
 * Writes a stream of events. A cut ends the socket after `cutAfter` events, without the chunked body's last chunk:
 * the client's read fails as it does when a provider's connection drops. A stall sends `stallAfter` events and keeps
 * the connection open. `failAfter` replaces what follows its count with the provider's in-stream error.
 */
export function sendFrames(res: ServerResponse, frames: Frame[], fault: StreamFault, wire: Wire, ctx: WireContext): void {
  let out = frames;
  if (fault.failAfter) out = [...frames.slice(0, fault.failAfter.events), ...wire.streamError(fault.failAfter.failure, ctx, fault.failAfter.events)];
  const stopAt = fault.cutAfter ?? fault.stallAfter;
  const text = (stopAt === undefined ? out : out.slice(0, stopAt)).map((f) => frameText(f, wire.eol)).join('');
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  if (fault.cutAfter !== undefined) {
    res.flushHeaders();
    // Ended once what came before the cut is written to the socket: ended at once, Node 24 could drop what was
    // still queued, and the client would see no delta before the cut.
    res.write(text, () => res.socket?.end());
  } else if (fault.stallAfter !== undefined) {
    res.flushHeaders();
    if (text) res.write(text);
  } else {
    res.end(text);
  }
}
