import {
  APICallError, EmptyResponseBodyError, InvalidResponseDataError, JSONParseError, NoContentGeneratedError, NoObjectGeneratedError,
  NoOutputGeneratedError, TypeValidationError,
} from 'ai';
// From the public API, as a user's code would: the CommonJS build of dagent/ai-sdk then shares dagent's classes.
import { AuthFailureError, InvalidOutputError, NonRetryableError, RateLimitError, TaskError } from '../index.js';

/** Error class of a request whose prompt does not fit the model's context window: the next model in the task's list (a fallback with a larger window) may take it. */
export const CONTEXT_LENGTH_CLASS = 'context_length';
/** Error class of an answer the model refused to give (content filter, safety, an explicit refusal). */
export const REFUSAL_CLASS = 'refusal';

/** The prompt does not fit the model's context window (HTTP 400 with the provider's wording of it). */
export class ContextLengthError extends TaskError {
  constructor(message: string, opts: { cause?: unknown } = {}) {
    super(CONTEXT_LENGTH_CLASS, message, { cause: opts.cause });
  }
}

/** The model refused (finish reason content-filter: Anthropic's `refusal`, OpenAI's refusal or content filter, Google's SAFETY). */
export class RefusalError extends TaskError {
  constructor(message: string, opts: { cause?: unknown } = {}) {
    super(REFUSAL_CLASS, message, { cause: opts.cause });
  }
}

/**
 * How each provider words "the prompt is longer than the context window" in a 400: OpenAI's and vLLM's
 * `context_length_exceeded` / "maximum context length", Anthropic's "prompt is too long", Google's "exceeds the
 * maximum number of tokens", LiteLLM's ContextWindowExceededError.
 */
const CONTEXT_LENGTH_WORDING = /context_length_exceeded|maximum context length|context window|prompt is too long|exceeds the maximum number of tokens|input is too long/i;

/**
 * What API keys look like (OpenAI's and Anthropic's `sk-…`, Google's `AIza…`): a provider that quotes the key it
 * refused has it replaced in the message, which the attempt's log keeps.
 */
const KEY_SHAPES = /\b(?:sk-[A-Za-z0-9_-]{6,}|AIza[0-9A-Za-z_-]{20,})/g;

/** Most characters of a provider's error body kept in the message (the attempt's log shows it). */
const PROVIDER_TEXT_CHARS = 300;

/** Retry-After is either delta-seconds or an HTTP date. */
export function retryAfterSec(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  if (/^\d+(\.\d+)?$/.test(header.trim())) return Number(header);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

/** Google's 429 says how long to wait in its body (a RetryInfo detail, `"retryDelay": "7s"`), not in Retry-After. */
function retryDelayInBody(body: string): number | undefined {
  const m = /"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"/.exec(body);
  return m ? Math.ceil(Number(m[1])) : undefined;
}

/**
 * The error class an HTTP failure deserves: it decides between retrying, waiting and dead-lettering. The provider's
 * text is kept (shortened), never a request header: a key never reaches the attempt's log.
 */
export function llmHttpError(status: number, body: string, retryAfter: string | null = null): TaskError {
  const text = body.slice(0, PROVIDER_TEXT_CHARS).replace(KEY_SHAPES, '[key]');
  const message = `model call failed: HTTP ${status}${text ? `: ${text}` : ''}`;
  if (status === 429) return new RateLimitError(message, { retryAfterSec: retryAfterSec(retryAfter) ?? retryDelayInBody(body) });
  // Google answers a bad key with 400 INVALID_ARGUMENT, reason API_KEY_INVALID.
  if (status === 401 || status === 403 || (status === 400 && /API_KEY_INVALID/.test(body))) return new AuthFailureError(message);
  if ((status === 400 || status === 413) && CONTEXT_LENGTH_WORDING.test(body)) return new ContextLengthError(message);
  // 408 (request timeout) is the provider's trouble, not the request's: retry it like a 5xx.
  if (status >= 400 && status < 500 && status !== 408) return new NonRetryableError(message, { errorClass: 'bad_request' });
  return new TaskError('provider_error', message);
}

/**
 * The error class of what the AI SDK threw: an HTTP answer by its status (llmHttpError), no answer at all
 * (`APICallError` without a status: refused, reset, DNS, a stream cut) as provider_unreachable, an answer it could
 * not read as invalid_output (retried: the next answer may read). Anything else is no provider's doing and is
 * returned as it is. `where` names the endpoint in the message.
 */
export function llmSdkError(err: unknown, where?: string): unknown {
  if (err instanceof TaskError) return err;
  if (APICallError.isInstance(err)) {
    const at = err.url ?? where;
    if (err.statusCode === undefined) return new TaskError('provider_unreachable', `could not reach ${at}: ${err.message}`, { cause: err });
    // A 2xx whose body broke off (the connection cut mid-answer): the provider's trouble, not the request's.
    if (err.statusCode >= 200 && err.statusCode < 300) return new TaskError('provider_unreachable', `the answer from ${at} was cut off: ${err.message}`, { cause: err });
    const headers = err.responseHeaders ?? {};
    const retryAfter = Object.entries(headers).find(([k]) => k.toLowerCase() === 'retry-after')?.[1] ?? null;
    return llmHttpError(err.statusCode, err.responseBody ?? err.message, retryAfter);
  }
  if (InvalidResponseDataError.isInstance(err) || JSONParseError.isInstance(err) || TypeValidationError.isInstance(err)
    || EmptyResponseBodyError.isInstance(err) || NoContentGeneratedError.isInstance(err) || NoObjectGeneratedError.isInstance(err)
    || NoOutputGeneratedError.isInstance(err)) {
    return new InvalidOutputError(`unreadable answer${where ? ` from ${where}` : ''}: ${err.message.slice(0, PROVIDER_TEXT_CHARS)}`, { cause: err });
  }
  if (!(err instanceof Error) && typeof err === 'object' && err !== null) return llmStreamError(err, where);
  // A connection dropped mid-answer surfaces as the fetch's own TypeError ("terminated") or an abort without ours.
  if (err instanceof Error && (err.name === 'TypeError' || err.name === 'AbortError') && /terminated|socket|ECONNRESET|other side closed|aborted/i.test(err.message)) {
    return new TaskError('provider_unreachable', `the answer${where ? ` from ${where}` : ''} was cut off: ${err.message}`, { cause: err });
  }
  return err;
}

/**
 * The error a provider sends inside a stream it had begun (the AI SDK hands it over as the provider's JSON, not an
 * Error): Anthropic's `{type: 'error', error: {type: 'overloaded_error', message}}`, OpenAI's `{error: {type, code,
 * message}}` or `{type, code, message}`, Google's `{error: {code, status, message}}`. Its type, code or status
 * chooses the class as an HTTP status would: a rate limit, a prompt too long, else the provider's trouble.
 */
export function llmStreamError(body: object, where?: string): TaskError {
  const inner = (body as { error?: unknown }).error;
  const e = (typeof inner === 'object' && inner !== null ? inner : body) as Record<string, unknown>;
  const words = ['type', 'code', 'status'].map((k) => e[k]).filter((v) => typeof v === 'string' || typeof v === 'number').join(' ');
  const text = JSON.stringify(body).slice(0, PROVIDER_TEXT_CHARS).replace(KEY_SHAPES, '[key]');
  const message = `model call failed mid-answer${where ? ` (${where})` : ''}: ${text}`;
  if (/rate_limit|RESOURCE_EXHAUSTED|\b429\b/i.test(words)) return new RateLimitError(message);
  if (CONTEXT_LENGTH_WORDING.test(`${words} ${String(e.message ?? '')}`)) return new ContextLengthError(message);
  if (/authentication|permission|UNAUTHENTICATED|PERMISSION_DENIED|\b40[13]\b/i.test(words)) return new AuthFailureError(message);
  return new TaskError('provider_error', message);
}
