import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModel } from 'ai';

/**
 * The providers the llm agents call, through the AI SDK, chosen by the model name's prefix as rate limits name
 * models (`anthropic/claude-sonnet-4-5`, `openai/gpt-4o`, `google/gemini-2.5-flash`). A name with no prefix, or
 * with one that is no provider's (`meta-llama/Llama-3.1-8B-Instruct`, as vLLM names models), goes whole to the
 * OpenAI-compatible endpoint (vLLM, Ollama, LiteLLM, or OpenAI itself by default). Each provider names its
 * variables here and nowhere else: the first of `keyEnv` / `baseUrlEnv` that is set wins.
 */
export interface LlmProvider {
  /** What the docs and messages call it. */
  name: string;
  /** The model-name prefix it serves, without the slash; null: the OpenAI-compatible endpoint. */
  prefix: string | null;
  keyEnv: readonly string[];
  baseUrlEnv: readonly string[];
  baseUrlDefault: string;
  /**
   * Whether it can go without a key: a hosted provider never can; the OpenAI-compatible endpoint can when it is
   * plain HTTP (a self-hosted Ollama, vLLM or gateway on the network) or on this machine.
   */
  keyless: (baseUrl: URL) => boolean;
  /** The AI SDK model for a name (without the prefix). */
  model: (name: string, at: { baseUrl: string; apiKey: string | undefined }) => Exclude<LanguageModel, string>;
}

const LOCAL_HOSTS = ['localhost', '127.0.0.1', '[::1]', '::1'];

/**
 * OpenAI's own hosts (`api.openai.com`, `*.openai.azure.com`): OpenAI's provider, whose chat model sends the output
 * cap as `max_completion_tokens` to the reasoning models that refuse `max_tokens`; every other endpoint gets
 * `max_tokens`, the field OpenAI-compatible servers read (Ollama and LM Studio read only it).
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

// OpenAI's chat-completions model, for the compatible endpoint when it is OpenAI's own host: the protocol every compatible endpoint speaks.
const openaiChat = (name: string, at: { baseUrl: string; apiKey: string | undefined }) =>
  createOpenAI({ baseURL: at.baseUrl, apiKey: at.apiKey ?? '' }).chat(name);

export const LLM_PROVIDERS = [
  {
    name: 'Anthropic', prefix: 'anthropic', keyEnv: ['ANTHROPIC_API_KEY'], baseUrlEnv: ['DAGENT_LLM_ANTHROPIC_BASE_URL'],
    baseUrlDefault: 'https://api.anthropic.com/v1', keyless: () => false,
    model: (name, at) => createAnthropic({ baseURL: at.baseUrl, apiKey: at.apiKey ?? '' }).messages(name),
  },
  {
    // OpenAI's own API, the Responses API (POST <base>/responses): OpenAI's current protocol and the AI SDK's default
    // for it. A gateway that speaks only chat completions is the OpenAI-compatible endpoint below.
    name: 'OpenAI', prefix: 'openai', keyEnv: ['OPENAI_API_KEY'], baseUrlEnv: ['DAGENT_LLM_OPENAI_BASE_URL'],
    baseUrlDefault: 'https://api.openai.com/v1', keyless: () => false,
    model: (name, at) => createOpenAI({ baseURL: at.baseUrl, apiKey: at.apiKey ?? '' }).responses(name),
  },
  {
    name: 'Google', prefix: 'google', keyEnv: ['GOOGLE_GENERATIVE_AI_API_KEY'], baseUrlEnv: ['DAGENT_LLM_GOOGLE_BASE_URL'],
    baseUrlDefault: 'https://generativelanguage.googleapis.com/v1beta', keyless: () => false,
    model: (name, at) => createGoogleGenerativeAI({ baseURL: at.baseUrl, apiKey: at.apiKey ?? '' }).chat(name),
  },
  {
    name: 'the OpenAI-compatible endpoint', prefix: null, keyEnv: ['DAGENT_LLM_API_KEY', 'OPENAI_API_KEY'],
    baseUrlEnv: ['DAGENT_LLM_BASE_URL', 'OPENAI_BASE_URL'], baseUrlDefault: 'https://api.openai.com/v1',
    keyless: (url) => url.protocol !== 'https:' || LOCAL_HOSTS.includes(url.hostname),
    // vLLM, Ollama and LiteLLM take response_format json_schema: a task's output schema is sent as such.
    model: (name, at) => (maxTokensField(at.baseUrl) === 'max_completion_tokens'
      ? openaiChat(name, at)
      : createOpenAICompatible({ name: 'openai-compatible', baseURL: at.baseUrl, apiKey: at.apiKey, includeUsage: true, supportsStructuredOutputs: true }).chatModel(name)),
  },
] as const satisfies readonly LlmProvider[];

const COMPATIBLE: LlmProvider = LLM_PROVIDERS.find((p) => p.prefix === null)!;

/** The provider a model name chooses, and the name that provider knows the model by. */
export function llmProviderOf(model: string): { provider: LlmProvider; name: string } {
  const slash = model.indexOf('/');
  const prefix = slash > 0 ? model.slice(0, slash) : undefined;
  const provider: LlmProvider | undefined = LLM_PROVIDERS.find((p) => p.prefix !== null && p.prefix === prefix);
  return provider ? { provider, name: model.slice(slash + 1) } : { provider: COMPATIBLE, name: model };
}

/** A provider's endpoint and key as the environment sets them, or why it cannot be called. */
export function llmProviderAccess(provider: LlmProvider, env: NodeJS.ProcessEnv = process.env):
  { baseUrl: string; apiKey: string | undefined; problem?: undefined; malformed?: undefined } | { problem: string; malformed: boolean } {
  const firstSet = (names: readonly string[]) => names.map((n) => env[n]).find((v) => v !== undefined && v !== '');
  const baseUrl = (firstSet(provider.baseUrlEnv) ?? provider.baseUrlDefault).replace(/\/+$/, '');
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    return { problem: `${provider.baseUrlEnv[0]} is not a URL: ${baseUrl}`, malformed: true };
  }
  const apiKey = firstSet(provider.keyEnv);
  if (!apiKey && !provider.keyless(url)) {
    const keys = `${provider.keyEnv[0]}${provider.keyEnv.length > 1 ? ` (or ${provider.keyEnv.slice(1).join(', ')})` : ''}`;
    return {
      problem: provider.prefix === null
        ? `no API key for ${baseUrl}: set ${keys}, or ${provider.baseUrlEnv[0]} to a local endpoint`
        : `no API key for ${provider.name} (${provider.prefix}/… models) at ${baseUrl}: set ${keys}`,
      malformed: false,
    };
  }
  return { baseUrl, apiKey };
}
