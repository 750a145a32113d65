import {
  AuthFailureError, BUDGET_EXCEEDED_CLASS, defineAgent, InvalidOutputError, llmCost, llmPrices, NonRetryableError, RateLimitError, TaskError,
  type BudgetView, type ClaimedTask, type LlmPrice, type TaskContext,
} from '../src/index.js';

/**
 * An agent for any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM,
 * Ollama, LiteLLM, …). Configured from the environment when a task runs, so a
 * process can load it before the variables are final:
 *   DAGENT_LLM_BASE_URL (or OPENAI_BASE_URL), DAGENT_LLM_API_KEY (or OPENAI_API_KEY),
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
 * The request field that caps a completion's output. OpenAI deprecated `max_tokens` for `max_completion_tokens`,
 * and its reasoning models (o1, o3-mini and later) refuse `max_tokens` with a 400, on OpenAI and on Azure OpenAI
 * alike; most other OpenAI-compatible servers read `max_tokens` (Ollama and LM Studio read only it; vLLM and LiteLLM
 * read both, LiteLLM passing it on to OpenAI's reasoning models as `max_completion_tokens`). So OpenAI's own hosts
 * get the new field and every other endpoint the one they all know.
 */
export function maxTokensField(baseUrl: string): 'max_completion_tokens' | 'max_tokens' {
  let host: string;
  try {
    host = new URL(baseUrl).hostname;
  } catch {
    return 'max_tokens';
  }
  return host === 'api.openai.com' || host.endsWith('.openai.azure.com') ? 'max_completion_tokens' : 'max_tokens';
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
  const message = `chat completion failed: HTTP ${status}${body ? `: ${body.slice(0, 300)}` : ''}`;
  if (status === 429) return new RateLimitError(message, { retryAfterSec: retryAfterSec(retryAfter) });
  if (status === 401 || status === 403) return new AuthFailureError(message);
  // 408 (request timeout) is the provider's trouble, not the request's: retry it like a 5xx.
  if (status >= 400 && status < 500 && status !== 408) return new NonRetryableError(message, { errorClass: 'bad_request' });
  return new TaskError('provider_error', message);
}

interface Completion {
  choices?: { message?: { content?: unknown } }[];
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown; prompt_tokens_details?: { cached_tokens?: unknown } | null };
}

/** A token count from the provider's answer; anything but a whole number ≥ 0 counts as none. */
const tokenCount = (v: unknown): number => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : 0);

// Module-wide so a fleet of tasks on one unpriced model logs it once, not per call.
const warnedUnpriced = new Set<string>();

/**
 * Why this process cannot call its endpoint, or undefined: an HTTPS endpoint off this machine (a hosted provider)
 * needs an API key; plain HTTP (a self-hosted Ollama, vLLM or gateway on the network) and this machine may go
 * without; DAGENT_LLM_MAX_OUTPUT_TOKENS and DAGENT_LLM_PRICES must read. Checked when an agent starts (preflight),
 * so a judge or an llm agent without its key never registers and never spends a task's attempt finding out.
 */
export function llmConfigProblem(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const baseUrl = env.DAGENT_LLM_BASE_URL ?? env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1';
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    return `DAGENT_LLM_BASE_URL is not a URL: ${baseUrl}`;
  }
  const local = ['localhost', '127.0.0.1', '[::1]', '::1'].includes(url.hostname);
  if (url.protocol === 'https:' && !local && !(env.DAGENT_LLM_API_KEY ?? env.OPENAI_API_KEY)) {
    return `no API key for ${baseUrl}: set DAGENT_LLM_API_KEY (or OPENAI_API_KEY), or DAGENT_LLM_BASE_URL to a local endpoint`;
  }
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
  preflight: () => llmConfigProblem(),
  async run(task, ctx) {
    const model = task.model ?? process.env.DAGENT_LLM_MODEL;
    if (!model) throw new NonRetryableError('no model: the task names none and DAGENT_LLM_MODEL is not set', { errorClass: 'config' });
    const { text, usage } = await llmChat(model, llmMessages(task), ctx);
    return { type: 'text', model, text, usage };
  },
});

/**
 * One chat completion against the configured endpoint. Asks the budget first (the call's estimate: the prompt's
 * characters / 4 in, DAGENT_LLM_MAX_OUTPUT_TOKENS out) and makes no call that would not fit: the attempt fails
 * with class budget_exceeded instead. Reports the model and the cost to `ctx` (also for an answer that turns out
 * unusable: its tokens were spent; `usd: null` for a model with no price) and maps each kind of failure to an
 * error class.
 */
export async function llmChat(
  model: string, messages: ChatMessage[], ctx: Pick<TaskContext, 'signal' | 'log' | 'reportCost' | 'budgetFits' | 'budget'>,
): Promise<{ text: string; usage: { input: number; output: number; cachedRead: number } }> {
  const env = process.env;
  const prices = pricesRead();
  const maxOutputTokens = llmMaxOutputTokens();
  const baseUrl = (env.DAGENT_LLM_BASE_URL ?? env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1').replace(/\/+$/, '');
  const apiKey = env.DAGENT_LLM_API_KEY ?? env.OPENAI_API_KEY;
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

  let res: Response;
  let body: string;
  try {
    res = await fetch(`${baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
      body: JSON.stringify({ model, messages, [maxTokensField(baseUrl)]: maxOutputTokens }),
      signal: ctx.signal,
    });
    body = await res.text();
  } catch (err) {
    if (ctx.signal.aborted) throw err; // the runtime stopped us (max_duration, lease lost, shutdown) and knows why
    throw new TaskError('provider_unreachable', `could not reach ${baseUrl}: ${(err as Error).message}`, { cause: err });
  }
  if (!res.ok) throw llmHttpError(res.status, body, res.headers.get('retry-after'));

  let completion: Completion;
  try {
    completion = JSON.parse(body) as Completion;
  } catch (err) {
    throw new InvalidOutputError(`response is not JSON: ${body.slice(0, 300)}`, { cause: err });
  }
  // OpenAI counts the prompt tokens its cache served within prompt_tokens, and says how many in
  // prompt_tokens_details.cached_tokens: the ledger's cachedRead, priced apart. It charges nothing extra for writes.
  const input = tokenCount(completion.usage?.prompt_tokens);
  const usage = { input, output: tokenCount(completion.usage?.completion_tokens), cachedRead: Math.min(input, tokenCount(completion.usage?.prompt_tokens_details?.cached_tokens)) };
  const usd = llmCost(model, usage, prices);
  if (usd === null && !warnedUnpriced.has(model)) {
    warnedUnpriced.add(model);
    ctx.log.warn({ model }, 'no price for this model: its cost is recorded as unknown, its tokens still count (set DAGENT_LLM_PRICES)');
  }
  // Charged before the content check: tokens spent on an unusable answer still cost money.
  ctx.reportCost({ usd, tokens: usage, model });

  const text = completion.choices?.[0]?.message?.content;
  // An empty answer (e.g. a reasoning model that ran out of tokens) is as unusable as a missing one.
  if (typeof text !== 'string' || text === '') throw new InvalidOutputError(`response has no choices[0].message.content: ${body.slice(0, 300)}`);
  return { text, usage };
}
