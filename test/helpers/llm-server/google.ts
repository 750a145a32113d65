import { textPieces, type Answer, type Failure, type FailureKind, type Finish, type Usage } from './reply.js';
import { data, type ErrorAnswer, type Frame, type Wire, type WireContext } from './wire.js';

/**
 * Google's Gemini API: `POST …/models/{model}:generateContent` answers one GenerateContentResponse (candidates with
 * text and functionCall parts, usageMetadata); `…:streamGenerateContent?alt=sse` sends a sequence of them as `data:`
 * events, the last carrying finishReason and the whole usage. Google gives tool calls no id, and says a refusal with
 * finishReason SAFETY and no content.
 */

const FINISH: Record<Finish, string> = { stop: 'STOP', length: 'MAX_TOKENS', 'tool-calls': 'STOP', 'content-filter': 'SAFETY' };

/** Google's promptTokenCount counts the cached tokens too, cachedContentTokenCount saying how many. */
function usageOf(u: Usage) {
  return {
    promptTokenCount: u.input, candidatesTokenCount: u.output, totalTokenCount: u.input + u.output + (u.reasoning ?? 0),
    ...(u.cacheRead === undefined ? {} : { cachedContentTokenCount: u.cacheRead }),
    ...(u.reasoning === undefined ? {} : { thoughtsTokenCount: u.reasoning }),
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: u.input }],
  };
}

type GooglePart = { text: string } | { functionCall: { name: string; args: unknown } };

const SAFETY_RATINGS = [{ category: 'HARM_CATEGORY_DANGEROUS_CONTENT', probability: 'HIGH', blocked: true }];

function parts(a: Answer, streamed: boolean): GooglePart[] {
  if (a.finish === 'content-filter') return [];
  return a.parts.flatMap((p): GooglePart[] => {
    if (p.type === 'toolCall') return [{ functionCall: { name: p.name, args: p.input } }];
    if (p.type === 'refusal') return [];
    return streamed ? textPieces(p.text, a.chunkChars).map((text) => ({ text })) : [{ text: p.text }];
  });
}

function candidate(a: Answer, content: GooglePart[], finishReason: string | undefined) {
  return {
    ...(content.length === 0 ? {} : { content: { parts: content, role: 'model' } }),
    ...(finishReason === undefined ? {} : { finishReason }),
    ...(finishReason === 'SAFETY' ? { safetyRatings: SAFETY_RATINGS } : {}),
    index: 0,
  };
}

function body(a: Answer, ctx: WireContext) {
  return {
    candidates: [candidate(a, parts(a, false), FINISH[a.finish])],
    usageMetadata: usageOf(a.usage), modelVersion: a.model ?? ctx.model, responseId: `resp_${ctx.n}`,
  };
}

/** One event per text delta or function call; the last also says why the answer ended and the whole usage. */
function frames(a: Answer, ctx: WireContext): Frame[] {
  const pieces = parts(a, true);
  const chunks: GooglePart[][] = pieces.length === 0 ? [[]] : pieces.map((p) => [p]);
  const u = usageOf(a.usage);
  return chunks.map((content, i) => {
    const last = i === chunks.length - 1;
    return data({
      candidates: [candidate(a, content, last ? FINISH[a.finish] : undefined)],
      usageMetadata: last ? u : { promptTokenCount: u.promptTokenCount, totalTokenCount: u.promptTokenCount },
      modelVersion: a.model ?? ctx.model, responseId: `resp_${ctx.n}`,
    });
  });
}

const ERRORS: Record<FailureKind, { code: number; status: string; message: string; details?: unknown[] }> = {
  rate_limit: {
    code: 429, status: 'RESOURCE_EXHAUSTED',
    message: 'You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.',
  },
  // Google refuses a bad API key with 400, not 401.
  auth: {
    code: 400, status: 'INVALID_ARGUMENT', message: 'API key not valid. Please pass a valid API key.',
    details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com', metadata: { service: 'generativelanguage.googleapis.com' } }],
  },
  context_length: { code: 400, status: 'INVALID_ARGUMENT', message: 'The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).' },
  overloaded: { code: 503, status: 'UNAVAILABLE', message: 'The model is overloaded. Please try again later.' },
  server: { code: 500, status: 'INTERNAL', message: 'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting' },
};

/** Google's error body; a rate limit says when to come back in a RetryInfo detail, not in a Retry-After header. */
function errorBody(f: Failure) {
  const e = ERRORS[f.failure];
  const retry = f.retryAfterSec === undefined ? [] : [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${f.retryAfterSec}s` }];
  const details = [...(e.details ?? []), ...retry];
  return { error: { code: e.code, message: f.message ?? e.message, status: e.status, ...(details.length === 0 ? {} : { details }) } };
}

function failure(f: Failure): ErrorAnswer {
  return { status: ERRORS[f.failure].code, body: errorBody(f), headers: { ...f.headers } };
}

/** A stream that fails after it began carries the error body as its last event. */
const streamError = (kind: FailureKind): Frame[] => [data(errorBody({ kind: 'failure', failure: kind }))];

export const googleWire: Wire = { body, frames, failure, streamError, eol: '\r\n' };
