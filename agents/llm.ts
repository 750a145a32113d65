import {
  AuthFailureError, defineAgent, InvalidOutputError, NonRetryableError, RateLimitError, TaskError, type ClaimedTask, type TaskContext,
} from '../src/index.js';

/**
 * An agent for any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM,
 * Ollama, LiteLLM, …). Configured from the environment when a task runs, so a
 * process can load it before the variables are final:
 *   DAGENT_LLM_BASE_URL (or OPENAI_BASE_URL), DAGENT_LLM_API_KEY (or OPENAI_API_KEY),
 *   DAGENT_LLM_MODEL (when the task names none), DAGENT_LLM_PRICES (JSON price overrides),
 *   DAGENT_LLM_MODELS (the models it claims tasks for, comma-separated; default any).
 */

/** USD per 1M tokens. */
export interface Price { input: number; output: number }

// Exact names only: dated snapshots of one family have been priced differently.
export const LLM_PRICES: Readonly<Record<string, Price>> = {
  'gpt-4o': { input: 2.5, output: 10 },
  'gpt-4o-mini': { input: 0.15, output: 0.6 },
  'gpt-4.1': { input: 2, output: 8 },
  'gpt-4.1-mini': { input: 0.4, output: 1.6 },
  'gpt-4.1-nano': { input: 0.1, output: 0.4 },
  'o3-mini': { input: 1.1, output: 4.4 },
};

/** The built-in table with DAGENT_LLM_PRICES (`{"model":{"input":x,"output":y}}`) laid over it. */
export function llmPrices(overrides: string | undefined = process.env.DAGENT_LLM_PRICES): Record<string, Price> {
  if (!overrides) return { ...LLM_PRICES };
  let parsed: unknown;
  try {
    parsed = JSON.parse(overrides);
  } catch (err) {
    throw new NonRetryableError(`DAGENT_LLM_PRICES is not valid JSON: ${(err as Error).message}`, { errorClass: 'config' });
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new NonRetryableError('DAGENT_LLM_PRICES must be a JSON object {"model":{"input":x,"output":y}}', { errorClass: 'config' });
  }
  for (const [model, p] of Object.entries(parsed)) {
    const ok = (v: unknown) => typeof v === 'number' && Number.isFinite(v) && v >= 0;
    if (!p || !ok(p.input) || !ok(p.output)) {
      throw new NonRetryableError(`DAGENT_LLM_PRICES.${model} needs non-negative numbers input and output (USD per 1M tokens)`, { errorClass: 'config' });
    }
  }
  return { ...LLM_PRICES, ...(parsed as Record<string, Price>) };
}

/** Cost in USD of one call, or null when the model has no price. */
export function llmCostUsd(model: string, tokens: { input: number; output: number }, prices: Record<string, Price> = llmPrices()): number | null {
  const p = Object.hasOwn(prices, model) ? prices[model] : undefined;
  return p ? (tokens.input * p.input + tokens.output * p.output) / 1_000_000 : null;
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
  usage?: { prompt_tokens?: number; completion_tokens?: number };
}

// Module-wide so a fleet of tasks on one unpriced model logs it once, not per call.
const warnedUnpriced = new Set<string>();

/**
 * The models an agent serves, from a comma-separated variable (`gpt-4o,gpt-4o-mini`); unset: `*`, any
 * model the task names (an OpenAI-compatible endpoint is often a gateway to many; it refuses one it lacks).
 */
/**
 * Why this process cannot call its endpoint, or undefined: an HTTPS endpoint off this machine (a hosted provider)
 * needs an API key; plain HTTP (a self-hosted Ollama, vLLM or gateway on the network) and this machine may go
 * without. Checked when an agent starts (preflight), so a judge or an llm agent without its key never registers
 * and never spends a task's attempt finding out.
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
  return undefined;
}

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
 * One chat completion against the configured endpoint. Reports the model and the
 * cost to `ctx` (also for an answer that turns out unusable: its tokens were spent)
 * and maps each kind of failure to an error class.
 */
export async function llmChat(
  model: string, messages: ChatMessage[], ctx: Pick<TaskContext, 'signal' | 'log' | 'reportCost'>,
): Promise<{ text: string; usage: { input: number; output: number } }> {
  const env = process.env;
  const prices = llmPrices();
  const baseUrl = (env.DAGENT_LLM_BASE_URL ?? env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1').replace(/\/+$/, '');
  const apiKey = env.DAGENT_LLM_API_KEY ?? env.OPENAI_API_KEY;
  // Recorded up front so a failed attempt still shows which model it tried.
  ctx.reportCost({ model });

  let res: Response;
  let body: string;
  try {
    res = await fetch(`${baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
      body: JSON.stringify({ model, messages }),
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
  const usage = { input: completion.usage?.prompt_tokens ?? 0, output: completion.usage?.completion_tokens ?? 0 };
  const usd = llmCostUsd(model, usage, prices);
  if (usd === null && !warnedUnpriced.has(model)) {
    warnedUnpriced.add(model);
    ctx.log.warn({ model }, 'no price for this model: its cost is recorded as 0 (set DAGENT_LLM_PRICES)');
  }
  // Charged before the content check: tokens spent on an unusable answer still cost money.
  ctx.reportCost({ usd: usd ?? 0, tokens: usage, model });

  const text = completion.choices?.[0]?.message?.content;
  // An empty answer (e.g. a reasoning model that ran out of tokens) is as unusable as a missing one.
  if (typeof text !== 'string' || text === '') throw new InvalidOutputError(`response has no choices[0].message.content: ${body.slice(0, 300)}`);
  return { text, usage };
}
