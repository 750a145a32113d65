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
 * The built-in prices (OpenAI's list prices). Exact names only: dated snapshots of one family have been priced
 * differently. OpenAI charges nothing extra for writing its prompt cache, so cacheWrite is left to default to the
 * input price. Only prices we are sure of: a model missing here is reported at an unknown cost, never a guessed one.
 */
export const LLM_PRICES: Readonly<Record<string, Readonly<LlmPrice>>> = {
  'gpt-4o': { input: 2.5, cachedRead: 1.25, output: 10 },
  'gpt-4o-mini': { input: 0.15, cachedRead: 0.075, output: 0.6 },
  'gpt-4.1': { input: 2, cachedRead: 0.5, output: 8 },
  'gpt-4.1-mini': { input: 0.4, cachedRead: 0.1, output: 1.6 },
  'gpt-4.1-nano': { input: 0.1, cachedRead: 0.025, output: 0.4 },
  'o3-mini': { input: 1.1, cachedRead: 0.55, output: 4.4 },
};

const PRICE_FIELDS = ['input', 'output', 'cachedRead', 'cacheWrite'] as const;
const REQUIRED_FIELDS = new Set<string>(['input', 'output']);
/** A value as an error shows it: NaN and Infinity as themselves (JSON would say null). */
const shown = (v: unknown) => (typeof v === 'number' ? String(v) : JSON.stringify(v));

/**
 * The built-in table with overrides laid over it: JSON `{"model": {"input": x, "output": y, "cachedRead"?: z,
 * "cacheWrite"?: w}}` (USD per 1M tokens), by default from DAGENT_LLM_PRICES. Throws InvalidInputError naming the
 * model and the field of a bad entry (a typo in a price would silently misprice every call).
 */
export function llmPrices(overrides: string | undefined = process.env.DAGENT_LLM_PRICES, source = 'DAGENT_LLM_PRICES'): Record<string, LlmPrice> {
  if (!overrides) return { ...LLM_PRICES };
  let parsed: unknown;
  try {
    parsed = JSON.parse(overrides);
  } catch (err) {
    throw new InvalidInputError(`${source} is not valid JSON: ${(err as Error).message}`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new InvalidInputError(`${source} must be a JSON object {"model": {"input": usdPer1M, "output": usdPer1M}}`);
  }
  const table: Record<string, LlmPrice> = { ...LLM_PRICES };
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
 * A model's price: its name as given, else without a leading provider prefix (`openai/gpt-4o` → `gpt-4o`), so a
 * gateway's names find the provider's prices while an entry for the prefixed name still wins.
 */
export function llmPriceOf(model: string, prices: Record<string, LlmPrice> = llmPrices()): LlmPrice | undefined {
  if (Object.hasOwn(prices, model)) return prices[model];
  const slash = model.indexOf('/');
  const bare = slash > 0 ? model.slice(slash + 1) : undefined;
  return bare && Object.hasOwn(prices, bare) ? prices[bare] : undefined;
}

/**
 * What one call cost in USD, or null when the model has no price (the cost is unknown: report it as `usd: null`,
 * never 0). The input price applies to input − cachedRead − cacheWrite; the cached parts are priced apart.
 */
export function llmCost(model: string, usage: LlmUsage, prices: Record<string, LlmPrice> = llmPrices()): number | null {
  for (const field of PRICE_FIELDS) {
    const v = usage[field];
    if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v < 0)) {
      throw new InvalidInputError(`usage.${field} must be a non-negative number of tokens, got ${shown(v)}`);
    }
  }
  const p = llmPriceOf(model, prices);
  if (!p) return null;
  const cachedRead = usage.cachedRead ?? 0;
  const cacheWrite = usage.cacheWrite ?? 0;
  // Clamped: usage whose cached parts exceed its input (a provider that counts them apart) is charged for the
  // cached parts as they are, never a negative remainder.
  const uncached = Math.max(0, usage.input - cachedRead - cacheWrite);
  return (uncached * p.input + cachedRead * (p.cachedRead ?? p.input) + cacheWrite * (p.cacheWrite ?? p.input) + usage.output * p.output) / 1_000_000;
}
