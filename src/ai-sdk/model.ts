import { createHash } from 'node:crypto';
import type {
  LanguageModelV2, LanguageModelV3, LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4GenerateResult, LanguageModelV4StreamPart,
  LanguageModelV4StreamResult,
} from '@ai-sdk/provider';
import { wrapLanguageModel, type LanguageModelMiddleware } from 'ai';
// From the public API, as a user's code would: the CommonJS build of dagent/ai-sdk then shares dagent's classes.
import {
  BUDGET_EXCEEDED_CLASS, InvalidInputError, llmCost, llmPrices, NonRetryableError, TaskError, type LlmPrice, type TaskContext,
} from '../index.js';
import { canonicalJson } from '../canonical-json.js';
import { llmSdkError, RefusalError } from './errors.js';
import { streamPartsCompact, streamPartsReplay, streamTextOf, type RecordedStream } from './stream-record.js';
import { LLM_MAX_OUTPUT_TOKENS_DEFAULT, llmCallEstimate, llmPromptChars, llmUsageOrEstimate, type LlmCallUsage } from './usage.js';

/** What of a task's context the wrapper uses: an agent's `ctx` has all of it. */
export type DagentModelContext = Pick<TaskContext, 'signal' | 'log' | 'reportCost' | 'budgetFits' | 'budget' | 'step' | 'stream'>;

export interface DagentModelOptions {
  /**
   * The name the calls are priced, reported and recorded by (`anthropic/claude-sonnet-4-5`, as tasks name models).
   * Default: the provider's prefix (`anthropic`, `openai`, `google`) and the model's id; the bare id for any other provider.
   */
  name?: string;
  /** The attempt's stream the answers' text goes to as it arrives; false: none. Default `output`. */
  stream?: string | false;
  /** The output cap set on a call that sets none: the output part of the estimate checked against the budget. Default LLM_MAX_OUTPUT_TOKENS_DEFAULT. */
  maxOutputTokens?: number;
  /** The price table (src/llm-prices.ts). Default llmPrices(): the built-in prices under DAGENT_LLM_PRICES, read at each call. */
  prices?: Record<string, LlmPrice>;
  /** Record each call as a durable step, so a later attempt replays it instead of paying again. Default true. */
  durable?: boolean;
  /**
   * How long a streamed call may go without sending a part (the first included) before it is abandoned as
   * provider_unreachable (retried by policy). Default LLM_IDLE_TIMEOUT_MS_DEFAULT (2 minutes).
   */
  idleTimeoutMs?: number;
  /** How long a call that does not stream (generateText) may take before it is abandoned the same way. Default LLM_CALL_TIMEOUT_MS_DEFAULT (10 minutes). */
  callTimeoutMs?: number;
}

/** A streamed call that sends nothing for this long (its first part included) is abandoned: provider_unreachable. */
export const LLM_IDLE_TIMEOUT_MS_DEFAULT = 120_000;
/** A call that does not stream and has not answered after this long is abandoned: provider_unreachable. */
export const LLM_CALL_TIMEOUT_MS_DEFAULT = 600_000;

/**
 * Wraps any AI SDK language model so that, for the task `ctx` runs:
 * - each call is a durable step (ctx.step): a later attempt that makes the same request at the same point replays
 *   the recorded answer and pays nothing again; a changed request (a prompt that now names the earlier failure) is a
 *   new call;
 * - the budget is asked before each call (ctx.budgetFits, with the prompt's characters / 4 in and the output cap
 *   out) and a call that would not fit is not made: the attempt fails budget_exceeded;
 * - the usage (input, output, cache read and write) is reported as each call ends (ctx.reportCost, priced; an
 *   unpriced model's cost is unknown, its tokens still count);
 * - the answer's text goes to the attempt's stream as it arrives (streamText) or when it ends (generateText);
 * - the provider's failures become dagent's error classes (llmSdkError): 429 → rate_limit with its Retry-After,
 *   401/403 → auth_failure, a prompt too long → context_length, a refusal → refusal; a call that goes silent (no
 *   part of a stream for idleTimeoutMs, no answer for callTimeoutMs) is abandoned as provider_unreachable.
 * Use it as the model of generateText, streamText or an Agent: `generateText({ model: dagentModel(anthropic('…'), ctx), … })`.
 */
export function dagentModel(model: LanguageModelV2 | LanguageModelV3 | LanguageModelV4, ctx: DagentModelContext, options: DagentModelOptions = {}): LanguageModelV4 {
  return wrapLanguageModel({ model, middleware: dagentMiddleware(ctx, options) });
}

/** The default name of a model: `anthropic.messages` / `claude-…` → `anthropic/claude-…`; another provider's model by its id. */
export function dagentModelName(model: Pick<LanguageModelV4, 'provider' | 'modelId'>): string {
  const provider = model.provider.split('.')[0];
  return provider === 'anthropic' || provider === 'openai' || provider === 'google' ? `${provider}/${model.modelId}` : model.modelId;
}

// Calls made per task context, so a step's name says which call of the attempt it is.
const callsMade = new WeakMap<object, number>();
// Module-wide so a fleet of tasks on one unpriced model logs it once, not per call.
const warnedUnpriced = new Set<string>();

/** Most characters of the model's name in a step's name (step names are at most 200). */
const STEP_MODEL_CHARS = 120;

/**
 * A call's step name: its number in the attempt, the model, and a digest of the request (messages, tools, options),
 * so a later attempt replays a recorded answer only for the same request at the same point.
 */
function stepName(call: number, name: string, params: LanguageModelV4CallOptions): string {
  const { abortSignal: _signal, headers: _headers, includeRawChunks: _raw, ...request } = params;
  // Canonical JSON: a replayed answer's parts come back from jsonb with their keys in another order, and the next
  // request, which quotes them, must digest the same (else every call after the first replayed one is paid again).
  const digest = createHash('sha256').update(canonicalJson(request)).digest('hex').slice(0, 16);
  return `model call ${call} ${name.slice(0, STEP_MODEL_CHARS)} ${digest}`;
}

/** The middleware behind dagentModel, for wrapLanguageModel with middleware of one's own. */
export function dagentMiddleware(ctx: DagentModelContext, options: DagentModelOptions = {}): LanguageModelMiddleware {
  const durable = options.durable ?? true;
  const outputCap = options.maxOutputTokens ?? LLM_MAX_OUTPUT_TOKENS_DEFAULT;
  const writer = () => (options.stream === false ? undefined : ctx.stream(options.stream));

  const prices = (): Record<string, LlmPrice> => {
    if (options.prices) return options.prices;
    try {
      return llmPrices();
    } catch (err) {
      throw new NonRetryableError((err as Error).message, { errorClass: 'config', cause: err });
    }
  };

  /**
   * Before the call: with the output capped at the estimate's allowance, a call that fits cannot pass a limit by more
   * than the prompt estimate's error. The model is reported first, so a failed call (a 429 pauses the model for the
   * fleet) and a failed attempt name it.
   */
  const budgetCheck = async (name: string, params: LanguageModelV4CallOptions) => {
    ctx.reportCost({ model: name }).catch(() => {});
    const estimate = llmCallEstimate(name, llmPromptChars(params), params.maxOutputTokens ?? outputCap, prices());
    const tokens = estimate.inputTokens + estimate.outputTokens;
    if (await ctx.budgetFits(estimate.usd === null ? { tokens } : { usd: estimate.usd, tokens })) return estimate;
    const cost = estimate.usd === null ? 'an unknown cost (no price)' : usdText(estimate.usd);
    throw new TaskError(BUDGET_EXCEEDED_CLASS, `no call to ${name}: it may spend ${cost} and ${tokens} tokens `
      + `(${estimate.inputTokens} estimated in, up to ${estimate.outputTokens} out); the attempt has ${budgetLeftText(ctx.budget)}`);
  };

  /** Report a call's usage, priced, and wait until it is durable (a report past a limit stops the attempt). */
  const charge = async (name: string, usage: LlmCallUsage & { estimated?: boolean }) => {
    if (usage.estimated) ctx.log.info({ model: name, tokens: usage }, 'no usage came with this answer: its estimate is charged');
    const { estimated: _estimated, ...tokens } = usage;
    const usd = llmCost(name, tokens, prices());
    if (usd === null && !warnedUnpriced.has(name)) {
      warnedUnpriced.add(name);
      ctx.log.warn({ model: name }, 'no price for this model: its cost is recorded as unknown, its tokens still count (set DAGENT_LLM_PRICES)');
    }
    await ctx.reportCost({ usd, tokens, model: name });
  };

  const unrecordedWarn = (name: string, call: number, err: Error) =>
    ctx.log.warn({ model: name, call, err: err.message }, 'model call answered but not recorded: a retry will make it again');

  const failure = (err: unknown, name: string) => (ctx.signal.aborted ? err : llmSdkError(err, name));

  const refusalCheck = (name: string, finish: { unified: string; raw: string | undefined }, text: string) => {
    if (finish.unified !== 'content-filter') return;
    throw new RefusalError(`${name} refused (finish reason ${finish.raw ?? finish.unified})${text ? `: ${text.slice(0, 300)}` : ''}`);
  };

  /**
   * A call begun: the budget asked, then the provider called (`call`, with the timer's signal: a call that goes silent
   * for `ms` is aborted); its failure as dagent's class. The timer goes on for a stream's parts (reset at each).
   */
  const callBegin = async <R>(name: string, params: LanguageModelV4CallOptions, ms: number, call: (p: LanguageModelV4CallOptions) => PromiseLike<R>) => {
    const estimate = await budgetCheck(name, params);
    const timer = silenceTimer(name, ms, params.abortSignal);
    try {
      return { estimate, timer, result: await call({ ...params, abortSignal: timer.signal }) };
    } catch (err) {
      timer.clear();
      throw timer.expired() ?? failure(err, name);
    }
  };

  const durably = <T>(call: number, name: string, params: LanguageModelV4CallOptions, fn: () => Promise<T>): Promise<T> =>
    (durable ? ctx.step(stepName(call, name, params), fn) : fn());

  return {
    specificationVersion: 'v4',
    transformParams: async ({ params }) => (params.maxOutputTokens === undefined ? { ...params, maxOutputTokens: outputCap } : params),

    wrapGenerate: async ({ params, model }) => {
      const name = options.name ?? dagentModelName(model);
      const call = nextCall(ctx);
      let live = false;
      let answered: RecordedGenerate | undefined;
      let recorded: RecordedGenerate;
      try {
        recorded = await durably(call, name, params, async (): Promise<RecordedGenerate> => {
          live = true;
          const { estimate, result, timer } = await callBegin(name, params, options.callTimeoutMs ?? LLM_CALL_TIMEOUT_MS_DEFAULT, (p) => model.doGenerate(p));
          timer.clear();
          // Charged before any check of the answer: tokens spent on an unusable answer still cost money.
          await charge(name, llmUsageOrEstimate(result.usage, estimate.inputTokens, contentText(result.content).length));
          refusalCheck(name, result.finishReason, contentText(result.content));
          return (answered = generateRecord(result));
        });
      } catch (err) {
        // Answered and paid for, but too large to record (LIMITS.stepResultBytes): used unrecorded, not lost.
        if (!answered || !(err instanceof InvalidInputError)) throw err;
        unrecordedWarn(name, call, err);
        recorded = answered;
      }
      const text = contentText(recorded.content);
      if (!live) ctx.log.info({ model: name, call }, 'model call replayed: its answer was recorded by an earlier attempt');
      if (text) writer()?.write(text);
      return generateRevive(recorded);
    },

    wrapStream: async ({ params, model }) => {
      const name = options.name ?? dagentModelName(model);
      const call = nextCall(ctx);
      const out = streamRelay();
      let started: ((r: Omit<LanguageModelV4StreamResult, 'stream'>) => void) | undefined;
      const whenStarted = new Promise<Omit<LanguageModelV4StreamResult, 'stream'>>((resolve) => { started = resolve; });
      let live = false;
      let finished = false;

      const recording = durably(call, name, params, async (): Promise<RecordedStream> => {
        live = true;
        const { estimate, result, timer } = await callBegin(name, params, options.idleTimeoutMs ?? LLM_IDLE_TIMEOUT_MS_DEFAULT, (p) => model.doStream(p));
        started!({ request: result.request, response: result.response });
        const sink = writer();
        const parts: LanguageModelV4StreamPart[] = [];
        let finish: Extract<LanguageModelV4StreamPart, { type: 'finish' }> | undefined;
        let outputChars = 0;
        const reader = result.stream.getReader();
        try {
          for (;;) {
            const { done, value } = await reader.read();
            timer.reset();
            if (done) break;
            if (value.type === 'error') throw value.error;
            if (value.type === 'raw') continue;
            if (value.type === 'finish') {
              finish = value;
              continue; // held back until charged and checked, so the caller never sees an end the attempt refuses
            }
            parts.push(value);
            if (value.type === 'text-delta') {
              outputChars += value.delta.length;
              sink?.write(value.delta);
            }
            out.push(value);
          }
          if (!finish) throw new TaskError('provider_unreachable', `the answer from ${name} ended before its finish`);
        } catch (err) {
          timer.clear();
          // The provider bills what it sent: charge the estimate of it (the prompt, and the text that came), as no usage came.
          if (!finish) await charge(name, llmUsageOrEstimate(undefined, estimate.inputTokens, outputChars)).catch(() => {});
          throw timer.expired() ?? failure(err, name);
        }
        timer.clear();
        await charge(name, llmUsageOrEstimate(finish.usage, estimate.inputTokens, outputChars));
        refusalCheck(name, finish.finishReason, streamTextOf(parts));
        out.push(finish);
        finished = true;
        return { parts: streamPartsCompact([...parts, finish]) };
      });

      // Either the live call started (its parts flow as they come), or the step replayed, or it failed before starting.
      const first = await Promise.race([
        whenStarted.then((r) => ({ live: r })),
        recording.then((rec) => ({ recorded: rec }), (err: unknown) => ({ failed: err })),
      ]);
      // Failed before it began (a 429, a prompt too long, no connection): as a stream that fails at once, so streamText's
      // text and output reject with dagent's error itself (a throw here reaches them as NoOutputGeneratedError).
      if ('failed' in first) {
        const failed = first.failed;
        return { stream: new ReadableStream<LanguageModelV4StreamPart>({ start: (c) => c.error(failed) }) };
      }
      if ('recorded' in first && !live) {
        ctx.log.info({ model: name, call }, 'model call replayed: its answer was recorded by an earlier attempt');
        const text = streamTextOf(first.recorded.parts);
        if (text) writer()?.write(text);
        return { stream: streamPartsReplay(first.recorded.parts) };
      }
      recording.then(() => out.close(), (err: unknown) => {
        // Answered and paid for, but too large to record (LIMITS.stepResultBytes): the caller has it all, unrecorded.
        if (finished && err instanceof InvalidInputError) {
          unrecordedWarn(name, call, err);
          out.close();
        } else out.fail(err);
      });
      const meta = 'live' in first ? first.live : await whenStarted;
      return { ...meta, stream: out.stream };
    },
  };
}

/**
 * A call's silence timer: its signal aborts the provider's request (and follows the caller's) once `ms` pass without a
 * reset; `expired()` is then the error the call fails with (provider_unreachable: retried by policy).
 */
function silenceTimer(name: string, ms: number, outer: AbortSignal | undefined) {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let fired = false;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => { fired = true; controller.abort(); }, ms);
  };
  arm();
  return {
    signal: outer ? AbortSignal.any([outer, controller.signal]) : controller.signal,
    reset: arm,
    clear: () => clearTimeout(timer),
    expired: () => (fired && !outer?.aborted
      ? new TaskError('provider_unreachable', `${name} sent nothing for ${ms / 1000} s: the call was abandoned`)
      : undefined),
  };
}

function nextCall(ctx: object): number {
  const n = (callsMade.get(ctx) ?? 0) + 1;
  callsMade.set(ctx, n);
  return n;
}

/** A ReadableStream fed from outside: parts pushed as they come, then closed or failed. */
function streamRelay() {
  let controller!: ReadableStreamDefaultController<LanguageModelV4StreamPart>;
  let done = false;
  const stream = new ReadableStream<LanguageModelV4StreamPart>({ start: (c) => { controller = c; } });
  return {
    stream,
    push: (part: LanguageModelV4StreamPart) => { if (!done) controller.enqueue(part); },
    close: () => { if (!done) { done = true; controller.close(); } },
    fail: (err: unknown) => { if (!done) { done = true; controller.error(err); } },
  };
}

/** A generate result as recorded: what the caller reads, without the request and response bodies (large, and already paid for). */
type RecordedGenerate = Omit<LanguageModelV4GenerateResult, 'request' | 'response'> & {
  response?: { id?: string; timestamp?: string; modelId?: string };
};

function generateRecord(r: LanguageModelV4GenerateResult): RecordedGenerate {
  const { request: _request, response, ...rest } = r;
  return {
    ...rest,
    ...(response ? { response: { id: response.id, modelId: response.modelId, timestamp: response.timestamp?.toISOString() } } : {}),
  };
}

function generateRevive(r: RecordedGenerate): LanguageModelV4GenerateResult {
  const { response, ...rest } = r;
  return {
    ...rest,
    ...(response ? { response: { id: response.id, modelId: response.modelId, timestamp: response.timestamp ? new Date(response.timestamp) : undefined } } : {}),
  };
}

function contentText(content: LanguageModelV4GenerateResult['content']): string {
  return content.map((c) => (c.type === 'text' ? c.text : '')).join('');
}

const usdText = (usd: number) => `$${Number(usd.toFixed(6))}`;

/** What an attempt has left, for the message of a call it did not make. */
function budgetLeftText(b: TaskContext['budget']): string {
  const left = [b.remainingUsd === null ? undefined : usdText(b.remainingUsd), b.remainingTokens === null ? undefined : `${b.remainingTokens} tokens`];
  const known = left.filter((s): s is string => s !== undefined);
  return known.length ? `${known.join(' and ')} left` : 'no budget left (the attempt was stopped or lost its task)';
}
