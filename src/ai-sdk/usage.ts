import type { LanguageModelV4CallOptions, LanguageModelV4Usage } from '@ai-sdk/provider';
import { llmCost, type LlmPrice } from '../index.js';

/** Output tokens a call may produce when it sets no cap of its own: the cap the model wrapper sends, and the output part of the estimate asked of the budget. */
export const LLM_MAX_OUTPUT_TOKENS_DEFAULT = 4096;

/**
 * Characters per token of the estimate before a call: about 4 for English text with OpenAI's tokenizers. Rough
 * on purpose (no tokenizer to load): the call's real usage, not the estimate, is what is charged.
 */
const CHARS_PER_TOKEN = 4;

/** A call's usage as the ledger keeps it: `input` counts every input token, `cachedRead` and `cacheWrite` the parts the prompt cache served and took. */
export interface LlmCallUsage { input: number; output: number; cachedRead: number; cacheWrite: number }

/** What one call may spend, asked of the budget before it is made. */
export interface LlmCallEstimate {
  /** The prompt's (and tool definitions') characters / 4, rounded up. */
  inputTokens: number;
  /** The output cap sent with the request. */
  outputTokens: number;
  /** Both at the model's price, with no input served from a cache; null: the model has no price. */
  usd: number | null;
}

/** A token count from a provider's usage; anything but a whole number ≥ 0 counts as none. */
const tokenCount = (v: unknown): number => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : 0);

/**
 * The ledger's usage from a model call's (the AI SDK's provider-level usage): `input` is the total when the provider
 * gives one, else the sum of its parts (Anthropic counts cache reads and writes apart from the rest).
 */
export function llmUsageOf(usage: LanguageModelV4Usage | undefined): LlmCallUsage {
  const i = usage?.inputTokens;
  const parts = tokenCount(i?.noCache) + tokenCount(i?.cacheRead) + tokenCount(i?.cacheWrite);
  const input = Math.max(tokenCount(i?.total), parts);
  const cachedRead = Math.min(input, tokenCount(i?.cacheRead));
  return {
    input, output: tokenCount(usage?.outputTokens?.total), cachedRead,
    cacheWrite: Math.min(input - cachedRead, tokenCount(i?.cacheWrite)),
  };
}

/** The characters of what a call sends the model: its messages' text, tool calls and results, and the tools' definitions. */
export function llmPromptChars(params: Pick<LanguageModelV4CallOptions, 'prompt' | 'tools' | 'responseFormat'>): number {
  let chars = 0;
  const json = (v: unknown) => (v === undefined ? 0 : (typeof v === 'string' ? v.length : JSON.stringify(v)?.length ?? 0));
  for (const message of params.prompt) {
    if (typeof message.content === 'string') {
      chars += message.content.length;
      continue;
    }
    for (const part of message.content) {
      if ('text' in part && typeof part.text === 'string') chars += part.text.length;
      else if (part.type === 'tool-call') chars += json(part.input) + part.toolName.length;
      else if (part.type === 'tool-result') chars += json(part.output);
    }
  }
  for (const tool of params.tools ?? []) chars += json(tool);
  if (params.responseFormat?.type === 'json') chars += json(params.responseFormat.schema);
  return chars;
}

export function llmCallEstimate(model: string, promptChars: number, maxOutputTokens: number, prices: Record<string, LlmPrice>): LlmCallEstimate {
  const inputTokens = Math.ceil(promptChars / CHARS_PER_TOKEN);
  return { inputTokens, outputTokens: maxOutputTokens, usd: llmCost(model, { input: inputTokens, output: maxOutputTokens }, prices) };
}

/**
 * A call's usage, or when none came (a stream cut before its end, or an OpenAI-compatible server that ignores
 * `stream_options.include_usage`) the estimate of what was sent: the prompt's estimated tokens in, the answer's
 * characters / 4 out. The provider bills what it took, so an estimate is charged rather than nothing.
 */
export function llmUsageOrEstimate(usage: LanguageModelV4Usage | undefined, estimatedInput: number, outputChars: number): LlmCallUsage & { estimated: boolean } {
  const none = usage?.inputTokens?.total === undefined && usage?.inputTokens?.noCache === undefined && usage?.outputTokens?.total === undefined;
  if (!none) return { ...llmUsageOf(usage), estimated: false };
  return { input: estimatedInput, output: Math.ceil(outputChars / CHARS_PER_TOKEN), cachedRead: 0, cacheWrite: 0, estimated: true };
}
