import {
  AuthFailureError, BUDGET_EXCEEDED_CLASS, defineAgent, InvalidOutputError, llmCost, llmPrices, NonRetryableError, RateLimitError, TaskError,
  type BudgetView, type ClaimedTask, type LlmPrice, type TaskContext,
} from '../src/index.js';
import {
  APICallError, EmptyResponseBodyError, generateText, InvalidResponseDataError, JSONParseError, TypeValidationError, type LanguageModelUsage,
} from 'ai';
import { LLM_PROVIDERS, llmProviderAccess, llmProviderOf } from './llm-providers.js';

/**
 * An agent for Anthropic, OpenAI, Google and any OpenAI-compatible chat-completions endpoint (vLLM, Ollama,
 * LiteLLM, …) through the AI SDK, the provider chosen by the model name's prefix (agents/llm-providers.ts, where
 * each provider's key and base URL variables are named). Configured from the environment when a task runs, so a
 * process can load it before the variables are final:
 *   DAGENT_LLM_MODEL (when the task names none), DAGENT_LLM_PRICES (JSON price overrides, src/llm-prices.ts),
 *   DAGENT_LLM_MAX_OUTPUT_TOKENS (each call's output cap), DAGENT_LLM_MODELS (the models it claims tasks for,
 *   comma-separated; default any).
 */

/** Output tokens a call may produce when DAGENT_LLM_MAX_OUTPUT_TOKENS is unset: the request's cap, and the output part of the estimate asked of the budget before the call. */
export const LLM_MAX_OUTPUT_TOKENS_DEFAULT = 4096;

/** DAGENT_LLM_MAX_OUTPUT_TOKENS, or the default. */
export function llmMaxOutputTokens(value: string | undefined = process.env.DAGENT_LLM_MAX_OUTPUT_TOKENS): number {
  if (value === undefined || value.trim() === '') return LLM_MAX_OUTPUT_TOKENS_DEFAULT;
  const n = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < 1) {
    throw new NonRetryableError(`DAGENT_LLM_MAX_OUTPUT_TOKENS must be a positive whole number of tokens, got ${JSON.stringify(value)}`, { errorClass: 'config' });
  }
  return n;
}

/** The price table (src/llm-prices.ts, DAGENT_LLM_PRICES over the built-in one); a bad override fails the attempt as `config`, not retried. */
function pricesRead(): Record<string, LlmPrice> {
  try {
    return llmPrices();
  } catch (err) {
    throw new NonRetryableError((err as Error).message, { errorClass: 'config', cause: err });
  }
}

/**
 * Characters per token of the estimate before a call: about 4 for English text with OpenAI's tokenizers. Rough
 * on purpose (no tokenizer to load): the call's real usage, not the estimate, is what is charged.
 */
const CHARS_PER_TOKEN = 4;

/** What one call may spend, asked of the budget before it is made. */
export interface LlmCallEstimate {
  /** The prompt's characters / 4, rounded up. */
  inputTokens: number;
  /** The output cap sent with the request (DAGENT_LLM_MAX_OUTPUT_TOKENS). */
  outputTokens: number;
  /** Both at the model's price, with no input served from a cache; null: the model has no price. */
  usd: number | null;
}

export function llmCallEstimate(model: string, messages: ChatMessage[], maxOutputTokens: number, prices: Record<string, LlmPrice>): LlmCallEstimate {
  const chars = messages.reduce((n, m) => n + m.content.length, 0);
  const inputTokens = Math.ceil(chars / CHARS_PER_TOKEN);
  return { inputTokens, outputTokens: maxOutputTokens, usd: llmCost(model, { input: inputTokens, output: maxOutputTokens }, prices) };
}

const usdText = (usd: number) => `$${Number(usd.toFixed(6))}`;

/** What an attempt has left, for the message of a call it did not make. */
function budgetLeftText(b: BudgetView): string {
  const left = [b.remainingUsd === null ? undefined : usdText(b.remainingUsd), b.remainingTokens === null ? undefined : `${b.remainingTokens} tokens`];
  const known = left.filter((s): s is string => s !== undefined);
  return known.length ? `${known.join(' and ')} left` : 'no budget left (the attempt was stopped or lost its task)';
}

export type ChatMessage = { role: 'system' | 'user'; content: string };

/** Most characters of a rejected earlier answer quoted back to the model. */
const REJECTED_ANSWER_CHARS = 4000;

/** What went wrong before, for the model to correct: each failed attempt's error, verdicts and (shortened) answer. */
export function previousAttemptsText(previous: ClaimedTask['previousAttempts'] | undefined): string | undefined {
  if (!previous?.length) return undefined;
  const lines = ['Earlier attempts at this task failed. Avoid their mistakes:'];
  for (const p of previous) {
    lines.push(`- attempt ${p.attempt}: ${p.errorClass ?? 'failed'}: ${p.errorMessage ?? ''}`.trimEnd());
    for (const v of (p.verdicts ?? []) as Array<{ kind?: string; pass?: boolean; reasons?: string[] }>) {
      if (v.pass === false) lines.push(`  - ${v.kind ?? 'validation'} said: ${(v.reasons ?? []).join('; ')}`);
    }
    if (p.rejectedOutput !== undefined) {
      const text = typeof p.rejectedOutput === 'string' ? p.rejectedOutput : JSON.stringify(p.rejectedOutput);
      lines.push(`  - that answer was: ${text.length > REJECTED_ANSWER_CHARS ? `${text.slice(0, REJECTED_ANSWER_CHARS)}…` : text}`);
    }
  }
  return lines.join('\n');
}

export function llmMessages(task: Pick<ClaimedTask, 'key' | 'spec' | 'inputs'> & Partial<Pick<ClaimedTask, 'previousAttempts'>>): ChatMessage[] {
  const extra = task.spec.input?.prompt;
  const parts = [task.spec.prompt, typeof extra === 'string' ? extra : undefined].filter((s): s is string => !!s);
  if (Object.keys(task.inputs).length > 0) {
    parts.push(`Outputs of the upstream tasks this one depends on, as JSON:\n${JSON.stringify(task.inputs, null, 2)}`);
  }
  if (parts.length === 0) throw new NonRetryableError(`task ${task.key} has no prompt and no inputs`, { errorClass: 'bad_request' });
  const previous = previousAttemptsText(task.previousAttempts);
  if (previous) parts.push(previous);
  return [
    {
      role: 'system',
      content: `You are performing one task ("${task.key}") of a larger DAG of tasks. Do only this task; ` +
        'other tasks will consume your answer, so reply with the result itself.',
    },
    { role: 'user', content: parts.join('\n\n') },
  ];
}

/** Retry-After is either delta-seconds or an HTTP date. */
export function retryAfterSec(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  if (/^\d+(\.\d+)?$/.test(header.trim())) return Number(header);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

/** The error class an HTTP failure deserves: it decides between retrying, waiting and dead-lettering. */
export function llmHttpError(status: number, body: string, retryAfter: string | null = null): TaskError {
  const message = `model call failed: HTTP ${status}${body ? `: ${body.slice(0, 300)}` : ''}`;
  if (status === 429) return new RateLimitError(message, { retryAfterSec: retryAfterSec(retryAfter) });
  if (status === 401 || status === 403) return new AuthFailureError(message);
  // 408 (request timeout) is the provider's trouble, not the request's: retry it like a 5xx.
  if (status >= 400 && status < 500 && status !== 408) return new NonRetryableError(message, { errorClass: 'bad_request' });
  return new TaskError('provider_error', message);
}

/**
 * The error class of what the AI SDK threw: an HTTP answer by its status (llmHttpError), no answer at all
 * (`APICallError` without a status: refused, reset, DNS) as provider_unreachable, an answer it could not read as
 * invalid_output (retried: the next answer may read). Anything else is no provider's doing and is thrown as it is.
 */
export function llmSdkError(err: unknown, baseUrl: string): unknown {
  if (APICallError.isInstance(err)) {
    if (err.statusCode === undefined) return new TaskError('provider_unreachable', `could not reach ${baseUrl}: ${err.message}`, { cause: err });
    const headers = err.responseHeaders ?? {};
    const retryAfter = Object.entries(headers).find(([k]) => k.toLowerCase() === 'retry-after')?.[1] ?? null;
    return llmHttpError(err.statusCode, err.responseBody ?? err.message, retryAfter);
  }
  if (InvalidResponseDataError.isInstance(err) || JSONParseError.isInstance(err) || TypeValidationError.isInstance(err) || EmptyResponseBodyError.isInstance(err)) {
    return new InvalidOutputError(`unreadable answer from ${baseUrl}: ${err.message.slice(0, 300)}`, { cause: err });
  }
  return err;
}

/** A token count from the SDK's usage; anything but a whole number ≥ 0 counts as none. */
const tokenCount = (v: unknown): number => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : 0);

/**
 * The ledger's usage from the SDK's: `input` counts every input token, cached ones included (the AI SDK's
 * inputTokens does, for every provider here), `cachedRead` and `cacheWrite` the parts the prompt cache served and
 * took, each priced apart.
 */
export function llmUsageOf(usage: LanguageModelUsage): { input: number; output: number; cachedRead: number; cacheWrite: number } {
  const input = tokenCount(usage.inputTokens);
  const cachedRead = Math.min(input, tokenCount(usage.inputTokenDetails?.cacheReadTokens));
  return {
    input, output: tokenCount(usage.outputTokens), cachedRead,
    cacheWrite: Math.min(input - cachedRead, tokenCount(usage.inputTokenDetails?.cacheWriteTokens)),
  };
}

// Module-wide so a fleet of tasks on one unpriced model logs it once, not per call.
const warnedUnpriced = new Set<string>();

/**
 * Why this process cannot call the providers it serves, or undefined. For each model it serves (DAGENT_LLM_MODELS,
 * or the judge's list), the provider the name chooses must have its key (llmProviderAccess); an agent serving any
 * model (`*`) needs one provider it can call, the OpenAI-compatible endpoint's problem named when it has none.
 * DAGENT_LLM_MAX_OUTPUT_TOKENS and DAGENT_LLM_PRICES must read. Checked when an agent starts (preflight), so a judge
 * or an llm agent without its key never registers and never spends a task's attempt finding out.
 */
export function llmConfigProblem(env: NodeJS.ProcessEnv = process.env, models: string[] = ['*']): string | undefined {
  const anyModel = models.includes('*');
  const problems = anyModel
    // A base URL that does not read is a typo to fix whichever providers are used.
    ? LLM_PROVIDERS.map((p) => llmProviderAccess(p, env)).filter((a) => a.malformed).map((a) => a.problem)
    : models.map((m) => llmProviderAccess(llmProviderOf(m).provider, env).problem);
  if (anyModel && !LLM_PROVIDERS.some((p) => !llmProviderAccess(p, env).problem)) {
    problems.push(llmProviderAccess(llmProviderOf('').provider, env).problem);
  }
  const problem = problems.find((p) => p !== undefined);
  if (problem) return problem;
  try {
    llmMaxOutputTokens(env.DAGENT_LLM_MAX_OUTPUT_TOKENS);
    llmPrices(env.DAGENT_LLM_PRICES);
  } catch (err) {
    return (err as Error).message;
  }
  return undefined;
}

/**
 * The models an agent serves, from a comma-separated variable (`gpt-4o,gpt-4o-mini`); unset: `*`, any
 * model the task names (an OpenAI-compatible endpoint is often a gateway to many; it refuses one it lacks).
 */
export function modelsFromEnv(value: string | undefined): string[] {
  const names = (value ?? '').split(',').map((m) => m.trim()).filter(Boolean);
  return names.length ? names : ['*'];
}

export default defineAgent({
  name: 'llm',
  capabilities: ['llm'],
  // Read when the module loads: set DAGENT_LLM_MODELS before the agent process starts.
  models: modelsFromEnv(process.env.DAGENT_LLM_MODELS),
  maxConcurrent: 4,
  preflight: () => llmConfigProblem(process.env, modelsFromEnv(process.env.DAGENT_LLM_MODELS)),
  async run(task, ctx) {
    const model = task.model ?? process.env.DAGENT_LLM_MODEL;
    if (!model) throw new NonRetryableError('no model: the task names none and DAGENT_LLM_MODEL is not set', { errorClass: 'config' });
    const { text, usage } = await llmChat(model, llmMessages(task), ctx);
    return { type: 'text', model, text, usage };
  },
});

/**
 * One model call (the AI SDK's generateText) to the provider the model's name chooses. Asks the budget first (the
 * call's estimate: the prompt's characters / 4 in, DAGENT_LLM_MAX_OUTPUT_TOKENS out) and makes no call that would
 * not fit: the attempt fails with class budget_exceeded instead. Reports the model and the cost to `ctx` (also for
 * an answer that turns out unusable: its tokens were spent; `usd: null` for a model with no price) and maps each
 * kind of failure to an error class. The SDK does not retry: the task's retry policy and the fleet-wide pause on
 * a 429 decide when to call again.
 */
export async function llmChat(
  model: string, messages: ChatMessage[], ctx: Pick<TaskContext, 'signal' | 'log' | 'reportCost' | 'budgetFits' | 'budget'>,
): Promise<{ text: string; usage: { input: number; output: number; cachedRead: number } }> {
  const prices = pricesRead();
  const maxOutputTokens = llmMaxOutputTokens();
  const { provider, name } = llmProviderOf(model);
  const access = llmProviderAccess(provider);
  if (access.problem !== undefined) throw new NonRetryableError(access.problem, { errorClass: 'config' });
  // Recorded up front so a failed attempt still shows which model it tried.
  ctx.reportCost({ model });

  // Before the call, not after: with the output capped at the estimate's allowance, a call that fits cannot pass
  // a limit by more than the prompt estimate's error.
  const estimate = llmCallEstimate(model, messages, maxOutputTokens, prices);
  const tokens = estimate.inputTokens + estimate.outputTokens;
  if (!(await ctx.budgetFits(estimate.usd === null ? { tokens } : { usd: estimate.usd, tokens }))) {
    const cost = estimate.usd === null ? 'an unknown cost (no price)' : usdText(estimate.usd);
    throw new TaskError(BUDGET_EXCEEDED_CLASS, `no call to ${model}: it may spend ${cost} and ${tokens} tokens `
      + `(${estimate.inputTokens} estimated in, up to ${estimate.outputTokens} out); the attempt has ${budgetLeftText(ctx.budget)}`);
  }

  let result: Awaited<ReturnType<typeof generateText>>;
  try {
    result = await generateText({
      model: provider.model(name, access), messages, maxOutputTokens, maxRetries: 0, abortSignal: ctx.signal,
      // The system message is dagent's own, not a task's text.
      allowSystemInMessages: true,
    });
  } catch (err) {
    if (ctx.signal.aborted) throw err; // the runtime stopped us (max_duration, lease lost, shutdown) and knows why
    throw llmSdkError(err, access.baseUrl);
  }
  const usage = llmUsageOf(result.usage);
  const usd = llmCost(model, usage, prices);
  if (usd === null && !warnedUnpriced.has(model)) {
    warnedUnpriced.add(model);
    ctx.log.warn({ model }, 'no price for this model: its cost is recorded as unknown, its tokens still count (set DAGENT_LLM_PRICES)');
  }
  // Charged before the content check: tokens spent on an unusable answer still cost money.
  ctx.reportCost({ usd, tokens: usage, model });

  // An empty answer (e.g. a reasoning model that ran out of tokens) is as unusable as a missing one.
  if (result.text === '') throw new InvalidOutputError(`${model} answered no text (finish reason ${result.finishReason})`);
  return { text: result.text, usage: { input: usage.input, output: usage.output, cachedRead: usage.cachedRead } };
}
