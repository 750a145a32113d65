import {
  defineAgent, InvalidOutputError, llmPrices, NonRetryableError,
  type ClaimedTask, type LlmPrice, type TaskContext,
} from '../src/index.js';
import { ContextLengthError, dagentModel, dagentTools, LLM_IDLE_TIMEOUT_MS_DEFAULT, LLM_MAX_OUTPUT_TOKENS_DEFAULT, llmSdkError } from '../src/ai-sdk/index.js';
import { jsonSchema, Output, stepCountIs, streamText, type ModelMessage, type StopCondition, type ToolSet } from 'ai';
import { LLM_PROVIDERS, llmProviderAccess, llmProviderOf } from './llm-providers.js';

export { LLM_MAX_OUTPUT_TOKENS_DEFAULT, llmHttpError, retryAfterSec } from '../src/ai-sdk/index.js';

/**
 * An agent for Anthropic, OpenAI, Google and any OpenAI-compatible chat-completions endpoint (vLLM, Ollama,
 * LiteLLM, …) through the AI SDK, the provider chosen by the model name's prefix (agents/llm-providers.ts, where
 * each provider's key and base URL variables are named). Each model call goes through dagentModel (dagent/ai-sdk):
 * a durable step, its text streamed to the task's `output` stream, its usage priced and reported, the budget asked
 * first. A task that declares a JSON Schema for its output gets an object of that schema; `spec.input.tools` offers
 * the model dagent's tools. Configured from the environment when a task runs, so a process can load it before the
 * variables are final:
 *   DAGENT_LLM_MODEL (when the task names none), DAGENT_LLM_PRICES (JSON price overrides, src/llm-prices.ts),
 *   DAGENT_LLM_MAX_OUTPUT_TOKENS (each call's output cap), DAGENT_LLM_IDLE_TIMEOUT_SEC (how long a model's stream may
 *   send nothing before the call is abandoned as provider_unreachable), DAGENT_LLM_MODELS (the models it claims tasks for,
 *   comma-separated; default any).
 */

/** DAGENT_LLM_MAX_OUTPUT_TOKENS, or the default. */
export function llmMaxOutputTokens(value: string | undefined = process.env.DAGENT_LLM_MAX_OUTPUT_TOKENS): number {
  if (value === undefined || value.trim() === '') return LLM_MAX_OUTPUT_TOKENS_DEFAULT;
  const n = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < 1) {
    throw new NonRetryableError(`DAGENT_LLM_MAX_OUTPUT_TOKENS must be a positive whole number of tokens, got ${JSON.stringify(value)}`, { errorClass: 'config' });
  }
  return n;
}

/** DAGENT_LLM_IDLE_TIMEOUT_SEC in ms (how long a model's stream may send nothing before the call is abandoned), or the default. */
export function llmIdleTimeoutMs(value: string | undefined = process.env.DAGENT_LLM_IDLE_TIMEOUT_SEC): number {
  if (value === undefined || value.trim() === '') return LLM_IDLE_TIMEOUT_MS_DEFAULT;
  const n = Number(value);
  if (!/^\s*\d+(\.\d+)?\s*$/.test(value) || !(n > 0)) {
    throw new NonRetryableError(`DAGENT_LLM_IDLE_TIMEOUT_SEC must be a positive number of seconds, got ${JSON.stringify(value)}`, { errorClass: 'config' });
  }
  return n * 1000;
}

/** The price overrides (DAGENT_LLM_PRICES, over the prices of src/llm-prices.ts); a bad one fails the attempt as `config`, not retried. */
function pricesRead(): Record<string, LlmPrice> {
  try {
    return llmPrices();
  } catch (err) {
    throw new NonRetryableError((err as Error).message, { errorClass: 'config', cause: err });
  }
}

export type ChatMessage = { role: 'system' | 'user'; content: string };

/** Most characters of a rejected earlier answer quoted back to the model. */
const REJECTED_ANSWER_CHARS = 4000;

/**
 * Failures that say something about the answer, for the model to correct: an answer that did not read or was
 * rejected (validation's verdicts, a judge's), a refusal. The rest (a crash, a timeout, a rate limit, a provider's
 * error) says nothing to the model, and is left out on purpose: the prompt of a retry after them is the same, so its
 * model calls replay the ones recorded (dagentModel) instead of paying again.
 */
const ANSWER_FAILURES = new Set(['invalid_output', 'judge_invalid_answer', 'refusal']);

/** What went wrong with earlier answers, for the model to correct: each such attempt's error, verdicts and (shortened) answer. */
export function previousAttemptsText(previous: ClaimedTask['previousAttempts'] | undefined): string | undefined {
  const relevant = (previous ?? []).filter((p) => p.rejectedOutput !== undefined || (p.verdicts?.length ?? 0) > 0 || ANSWER_FAILURES.has(p.errorClass ?? ''));
  if (!relevant.length) return undefined;
  const lines = ['Earlier attempts at this task failed. Avoid their mistakes:'];
  for (const p of relevant) {
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
    llmIdleTimeoutMs(env.DAGENT_LLM_IDLE_TIMEOUT_SEC);
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

/** Most model calls of one task's tool loop (each a step of the loop), when the task's input sets no `max_steps`. */
export const LLM_MAX_STEPS_DEFAULT = 10;
/** The highest `max_steps` a task may set. */
const LLM_MAX_STEPS_LIMIT = 50;

export default defineAgent({
  name: 'llm',
  capabilities: ['llm'],
  // Read when the module loads: set DAGENT_LLM_MODELS before the agent process starts.
  models: modelsFromEnv(process.env.DAGENT_LLM_MODELS),
  maxConcurrent: 4,
  preflight: () => llmConfigProblem(process.env, modelsFromEnv(process.env.DAGENT_LLM_MODELS)),
  async run(task, ctx) {
    const first = task.model ?? process.env.DAGENT_LLM_MODEL;
    if (!first) throw new NonRetryableError('no model: the task names none and DAGENT_LLM_MODEL is not set', { errorClass: 'config' });
    // A prompt longer than a model's window is tried on the attempt's next model (a fallback with a larger window).
    const models = [first, ...task.models.filter((m) => m !== first)];
    for (const [i, model] of models.entries()) {
      try {
        return await llmAnswer(model, task, ctx);
      } catch (err) {
        if (!(err instanceof ContextLengthError) || i === models.length - 1) throw err;
        ctx.log.warn({ model, next: models[i + 1] }, 'the prompt does not fit this model\'s context window: trying the next model');
      }
    }
    throw new Error('unreachable: the last model\'s failure is thrown');
  },
});

/**
 * The JSON Schema to ask the model's answer to match: a task whose output is declared `type: json` with a
 * json-schema validation step (the first) wants that object as its output. Undefined otherwise: the answer is text
 * (`{ type: 'text', model, text, usage }`, which a schema of the task may check as it always has).
 */
export function outputJsonSchema(outputSpec: ClaimedTask['outputSpec']): Record<string, unknown> | undefined {
  if (outputSpec?.type !== 'json') return undefined;
  const steps = (outputSpec?.validation ?? []) as Array<{ kind?: string; schema?: unknown }>;
  const schema = steps.find((v) => v.kind === 'json-schema' && v.schema && typeof v.schema === 'object')?.schema;
  return schema as Record<string, unknown> | undefined;
}

/** The task's `max_steps` (input), or the default; anything else is the task's mistake. */
function maxSteps(input: Record<string, unknown> | undefined): number {
  const v = input?.max_steps;
  if (v === undefined) return LLM_MAX_STEPS_DEFAULT;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1 || v > LLM_MAX_STEPS_LIMIT) {
    throw new NonRetryableError(`spec.input.max_steps must be a whole number from 1 to ${LLM_MAX_STEPS_LIMIT}, got ${JSON.stringify(v)}`, { errorClass: 'bad_request' });
  }
  return v;
}

/**
 * The task done on one model: a tool loop when the task offers tools (`spec.input.tools`), an object of the output's
 * JSON Schema when it declares one (the provider's native structured output), else text. Every call streams (its
 * text to the `output` stream) and goes through dagentModel.
 */
async function llmAnswer(model: string, task: ClaimedTask, ctx: TaskContext): Promise<unknown> {
  // Recorded up front so a failed attempt still shows which model it tried.
  ctx.reportCost({ model });
  const schema = outputJsonSchema(task.outputSpec);
  const input = task.spec.input as Record<string, unknown> | undefined;
  const offered = input?.tools;
  let tools: ReturnType<typeof dagentTools> | undefined;
  try {
    tools = offered === undefined ? undefined : dagentTools(ctx, { offer: offered });
  } catch (err) {
    throw new NonRetryableError((err as Error).message, { errorClass: 'bad_request', cause: err });
  }
  const stopWhen: StopCondition<ToolSet>[] = [stepCountIs(maxSteps(input))];
  if (tools) stopWhen.push(() => tools.waiting());
  let messages: Array<ChatMessage | ModelMessage> = llmMessages(task);
  for (;;) {
    const answer = await llmCall(model, messages, ctx, {
      tools: tools?.tools, stopWhen,
      ...(schema ? { output: Output.object({ schema: jsonSchema(schema) }) } : {}),
    });
    if (tools?.waiting()) {
      // Ends the attempt until the subtasks completed (the next attempt replays the calls above), unless they already
      // have: then this attempt goes on from what the model said so far, with their outputs; no call is sent twice.
      const children = await tools.wait();
      messages = [...messages, ...answer.responseMessages, {
        role: 'user', content: `The subtasks you waited for have completed. Their outputs, as JSON:\n${JSON.stringify(children, null, 2)}`,
      }];
      continue;
    }
    if (answer.steps >= maxSteps(input) && answer.finishReason === 'tool-calls') {
      throw new InvalidOutputError(`${model} was still calling tools after ${answer.steps} steps (max_steps): no answer`);
    }
    if (schema) return answer.output;
    // An empty answer (e.g. a reasoning model that ran out of tokens) is as unusable as a missing one.
    if (answer.text === '') throw new InvalidOutputError(`${model} answered no text (finish reason ${answer.finishReason})`);
    return { type: 'text', model, text: answer.text, usage: answer.usage };
  }
}

/**
 * One exchange with a model through dagentModel (a tool loop when `options.tools` is set), streamed: its text goes to
 * the task's `output` stream as it arrives. Fails with dagent's error classes (llmSdkError): budget_exceeded before
 * a call that would not fit, rate_limit, auth_failure, context_length, refusal, invalid_output for an answer that
 * does not read (or is no object of the schema). The SDK does not retry: the task's retry policy and the fleet-wide
 * pause on a 429 decide when to call again.
 */
export async function llmCall(
  model: string, messages: Array<ChatMessage | ModelMessage>, ctx: Pick<TaskContext, 'signal' | 'log' | 'reportCost' | 'budgetFits' | 'budget' | 'step' | 'stream'>,
  options: { tools?: ToolSet; stopWhen?: StopCondition<ToolSet>[]; output?: ReturnType<typeof Output.object> } = {},
): Promise<{ text: string; output: unknown; steps: number; finishReason: string; usage: { input: number; output: number; cachedRead: number }; responseMessages: ModelMessage[] }> {
  const { provider, name } = llmProviderOf(model);
  const access = llmProviderAccess(provider);
  if (access.problem !== undefined) throw new NonRetryableError(access.problem, { errorClass: 'config' });
  const wrapped = dagentModel(provider.model(name, access), ctx, {
    name: model, maxOutputTokens: llmMaxOutputTokens(), prices: pricesRead(), idleTimeoutMs: llmIdleTimeoutMs(),
  });
  let failure: unknown;
  const result = streamText({
    model: wrapped, messages: messages as ModelMessage[], maxRetries: 0, abortSignal: ctx.signal,
    // The system message is dagent's own, not a task's text.
    allowSystemInMessages: true,
    ...(options.tools ? { tools: options.tools } : {}),
    ...(options.stopWhen ? { stopWhen: options.stopWhen } : {}),
    ...(options.output ? { output: options.output } : {}),
    onError: ({ error }) => { failure ??= error; },
  });
  try {
    const [text, steps, finishReason, usage] = await Promise.all([result.text, result.steps, result.finishReason, result.totalUsage]);
    if (failure !== undefined) throw failure;
    const output = options.output ? await result.output : undefined;
    return {
      text, output, steps: steps.length, finishReason, responseMessages: (await result.response).messages,
      usage: { input: usage.inputTokens ?? 0, output: usage.outputTokens ?? 0, cachedRead: usage.inputTokenDetails?.cacheReadTokens ?? 0 },
    };
  } catch (err) {
    if (ctx.signal.aborted) throw err; // the runtime stopped us (max_duration, lease lost, shutdown) and knows why
    const mapped = llmSdkError(failure ?? err, access.baseUrl);
    // A provider may quote the key it refused: the attempt's log never shows it.
    if (access.apiKey && mapped instanceof Error) mapped.message = mapped.message.replaceAll(access.apiKey, '[key]');
    throw mapped;
  }
}
