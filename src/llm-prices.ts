import { createRequire } from 'node:module';
import type { ModelPrice, PriceCalculation, TieredPrices, Usage } from '@pydantic/genai-prices';
import { InvalidInputError } from './errors.js';

/**
 * What a model costs, in USD per 1M tokens. `cachedRead`: input tokens the provider's prompt cache served;
 * `cacheWrite`: input tokens written to it. Either, when absent, costs what `input` does.
 */
export interface LlmPrice { input: number; output: number; cachedRead?: number; cacheWrite?: number }

/**
 * The tokens of one call, as ctx.reportCost takes them: `input` counts every input token, cached ones included;
 * `cachedRead` and `cacheWrite` say how many of them the cache served and took (each priced apart).
 */
export interface LlmUsage { input: number; output: number; cachedRead?: number; cacheWrite?: number }

/**
 * A model's price as the price data lists it. `provider` and `model`: the ids there that the name matched
 * (`anthropic`, `claude-sonnet-4-5` for `anthropic/claude-sonnet-4-5-20250929`). `price`: the rates of a call whose
 * prompt (all its input tokens) is within the first tier; `tiers`, in ascending order: the rates every token of a
 * call pays instead once its prompt has more than `promptOver` tokens (Gemini 2.5 Pro past 200k, say). A rate the
 * data does not list is charged nothing (an embedding model's output), as llmCost charges it.
 */
export interface LlmListedPrice { provider: string; model: string; price: LlmPrice; tiers: Array<{ promptOver: number; price: LlmPrice }> }

type GenaiPrices = typeof import('@pydantic/genai-prices');
let genaiModule: GenaiPrices | undefined;
/**
 * The price data: @pydantic/genai-prices, its prices bundled in the package (looking one up never calls out; its
 * updatePrices, which would fetch newer data, is never called). Loaded at the first lookup, not with this module:
 * it takes ~75 ms and ~18 MB, which every `dagent` command importing the public API would otherwise pay.
 * CommonJS by require, so that lookups stay synchronous.
 */
const genai = (): GenaiPrices => (genaiModule ??= createRequire(import.meta.url)('@pydantic/genai-prices') as GenaiPrices);

/**
 * The model-name prefixes the llm agents call providers by (agents/llm-providers.ts), as the price data names those
 * providers. Any other name goes whole to the OpenAI-compatible endpoint (`meta-llama/Llama-3.1-8B-Instruct`).
 */
const PREFIX_PROVIDERS: Readonly<Record<string, string>> = { anthropic: 'anthropic', openai: 'openai', google: 'google' };
/** The provider the OpenAI-compatible endpoint is by default, which a bare name is priced as. */
const BARE_NAME_PROVIDER = 'openai';

/**
 * Where the price data lists a model: under the provider its prefix names, or, for a name the OpenAI-compatible
 * endpoint gets, under OpenAI, but only when the data itself reads the name as OpenAI's (`gpt-…`, `o3-…`): a
 * self-hosted `llama3` or a gateway's `openrouter/gpt-4o` is priced by nobody but DAGENT_LLM_PRICES.
 */
function listedUnder(model: string): { providerId: string; name: string } | undefined {
  const slash = model.indexOf('/');
  const prefix = slash > 0 ? model.slice(0, slash) : undefined;
  if (prefix !== undefined && Object.hasOwn(PREFIX_PROVIDERS, prefix)) {
    const name = model.slice(slash + 1);
    return name ? { providerId: PREFIX_PROVIDERS[prefix]!, name } : undefined;
  }
  return genai().findProvider({ modelId: model })?.id === BARE_NAME_PROVIDER ? { providerId: BARE_NAME_PROVIDER, name: model } : undefined;
}

/** The price data's bill for a call, or null when it lists no price for the model. */
function listedCalculation(model: string, usage: Usage, at: Date): PriceCalculation | null {
  const under = listedUnder(model);
  if (!under) return null;
  try {
    return genai().calcPrice(usage, under.name, { providerId: under.providerId, timestamp: at });
  } catch {
    // Price data the package cannot apply (a rate in a unit it does not know): the cost is unknown, and the call's
    // tokens are still reported, rather than a finished call failing over its price.
    return null;
  }
}

const LISTED_KEYS = { input: 'input_mtok', output: 'output_mtok', cachedRead: 'cache_read_mtok', cacheWrite: 'cache_write_mtok' } as const;

/** A listed rate for a prompt of `promptTokens`: a tier applies once the prompt is over its start. */
function rateAt(rate: number | TieredPrices | undefined, promptTokens: number): number | undefined {
  if (rate === undefined || typeof rate === 'number') return rate;
  let at = rate.base;
  for (const tier of rate.tiers) if (promptTokens > tier.start) at = tier.price;
  return at;
}

function priceAt(listed: ModelPrice, promptTokens: number): LlmPrice {
  const price: LlmPrice = { input: rateAt(listed[LISTED_KEYS.input], promptTokens) ?? 0, output: rateAt(listed[LISTED_KEYS.output], promptTokens) ?? 0 };
  const cachedRead = rateAt(listed[LISTED_KEYS.cachedRead], promptTokens);
  const cacheWrite = rateAt(listed[LISTED_KEYS.cacheWrite], promptTokens);
  if (cachedRead !== undefined) price.cachedRead = cachedRead;
  if (cacheWrite !== undefined) price.cacheWrite = cacheWrite;
  return price;
}

/**
 * What the price data lists for a model at `at` (now by default: a provider's price can change on a date), looked
 * up under the provider its prefix names (`anthropic/`, `openai/`, `google/`), a bare name under OpenAI when the
 * data reads it as OpenAI's; undefined when it lists none. DAGENT_LLM_PRICES plays no part here (llmPriceOf).
 */
export function llmListedPrice(model: string, at: Date = new Date()): LlmListedPrice | undefined {
  const found = listedCalculation(model, { input_tokens: 0 }, at);
  if (!found) return undefined;
  const listed = found.model_price;
  const starts = new Set<number>();
  for (const key of Object.values(LISTED_KEYS)) {
    const rate = listed[key];
    if (rate !== undefined && typeof rate !== 'number') for (const tier of rate.tiers) starts.add(tier.start);
  }
  return {
    provider: found.provider.id,
    model: found.model.id,
    price: priceAt(listed, 0),
    tiers: [...starts].sort((a, b) => a - b).map((start) => ({ promptOver: start, price: priceAt(listed, start + 1) })),
  };
}

const PRICE_FIELDS = ['input', 'output', 'cachedRead', 'cacheWrite'] as const;
const REQUIRED_FIELDS = new Set<string>(['input', 'output']);
/** A value as an error shows it: NaN and Infinity as themselves (JSON would say null). */
const shown = (v: unknown) => (typeof v === 'number' ? String(v) : JSON.stringify(v));

/**
 * The price overrides, laid over the price data by llmCost and llmPriceOf: JSON `{"model": {"input": x, "output": y,
 * "cachedRead"?: z, "cacheWrite"?: w}}` (USD per 1M tokens), by default from DAGENT_LLM_PRICES; `{}` when unset.
 * Throws InvalidInputError naming the model and the field of a bad entry (a typo in a price would silently misprice
 * every call).
 */
export function llmPrices(overrides: string | undefined = process.env.DAGENT_LLM_PRICES, source = 'DAGENT_LLM_PRICES'): Record<string, LlmPrice> {
  if (!overrides) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(overrides);
  } catch (err) {
    throw new InvalidInputError(`${source} is not valid JSON: ${(err as Error).message}`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new InvalidInputError(`${source} must be a JSON object {"model": {"input": usdPer1M, "output": usdPer1M}}`);
  }
  const table: Record<string, LlmPrice> = {};
  for (const [model, entry] of Object.entries(parsed)) {
    const at = `${source}[${JSON.stringify(model)}]`;
    if (!entry || typeof entry !== 'object' || Array.isArray(entry)) {
      throw new InvalidInputError(`${at} must be an object {"input": usdPer1M, "output": usdPer1M}`);
    }
    for (const field of Object.keys(entry)) {
      if (!(PRICE_FIELDS as readonly string[]).includes(field)) {
        throw new InvalidInputError(`${at}.${field} is not a price field: use ${PRICE_FIELDS.join(', ')}`);
      }
    }
    const price: Partial<LlmPrice> = {};
    for (const field of PRICE_FIELDS) {
      const v = (entry as Record<string, unknown>)[field];
      if (v === undefined && !REQUIRED_FIELDS.has(field)) continue;
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
        throw new InvalidInputError(`${at}.${field} must be a non-negative number (USD per 1M tokens), got ${v === undefined ? 'nothing' : shown(v)}`);
      }
      price[field] = v;
    }
    table[model] = price as LlmPrice;
  }
  return table;
}

/**
 * An override's entry for a model: its name as given, else without a leading provider prefix (`google/gemini-x` →
 * `gemini-x`), so one entry prices a model by either name while an entry for the prefixed name still wins.
 */
function overrideOf(model: string, prices: Record<string, LlmPrice>): LlmPrice | undefined {
  if (Object.hasOwn(prices, model)) return prices[model];
  const slash = model.indexOf('/');
  const bare = slash > 0 ? model.slice(slash + 1) : undefined;
  return bare && Object.hasOwn(prices, bare) ? prices[bare] : undefined;
}

/**
 * A model's price: the override's (by its name, then without a provider/ prefix), else the price data's rates for a
 * prompt within its first tier (llmListedPrice has the tiers, which llmCost applies).
 */
export function llmPriceOf(model: string, prices: Record<string, LlmPrice> = llmPrices()): LlmPrice | undefined {
  return overrideOf(model, prices) ?? llmListedPrice(model)?.price;
}

/**
 * What one call cost in USD, or null when the model has no price (the cost is unknown: report it as `usd: null`,
 * never 0). An override is priced as given: its input price applies to input − cachedRead − cacheWrite, the cached
 * parts priced apart. Otherwise the price data prices the call as the provider bills it: the cached parts at their
 * own rates, and, for a model whose rates rise with the prompt's size, every token at the rates of the tier its
 * prompt falls in. An Anthropic cache write is charged the 5-minute cache's rate (the usage does not say which).
 */
export function llmCost(model: string, usage: LlmUsage, prices: Record<string, LlmPrice> = llmPrices()): number | null {
  for (const field of PRICE_FIELDS) {
    const v = usage[field];
    if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v < 0)) {
      throw new InvalidInputError(`usage.${field} must be a non-negative number of tokens, got ${shown(v)}`);
    }
  }
  const cachedRead = usage.cachedRead ?? 0;
  const cacheWrite = usage.cacheWrite ?? 0;
  // Usage whose cached parts exceed its input (a provider that counts them apart) is charged for the cached parts
  // as they are, never a negative remainder: the input is taken as at least their sum.
  const input = Math.max(usage.input, cachedRead + cacheWrite);
  const p = overrideOf(model, prices);
  if (p) {
    const uncached = input - cachedRead - cacheWrite;
    return (uncached * p.input + cachedRead * (p.cachedRead ?? p.input) + cacheWrite * (p.cacheWrite ?? p.input) + usage.output * p.output) / 1_000_000;
  }
  const listed = listedCalculation(model, { input_tokens: input, cache_read_tokens: cachedRead, cache_write_tokens: cacheWrite, output_tokens: usage.output }, new Date());
  return listed ? listed.total_price : null;
}
