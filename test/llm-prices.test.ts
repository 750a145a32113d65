import { createRequire } from 'node:module';
import { findProvider, type ModelPrice } from '@pydantic/genai-prices';
import { describe, expect, it, vi } from 'vitest';
import { llmCost, llmListedPrice, llmPriceOf, llmPrices } from '../src/llm-prices.js';

const noOverrides = llmPrices(undefined);

/**
 * The package's own entry for a model, read from its provider's list by the model's id: not the name matching that
 * llmCost and llmListedPrice go through, so the expectations below are computed apart from the code under test.
 */
function packageEntry(providerId: string, modelId: string): ModelPrice {
  const model = findProvider({ providerId })?.models.find((m) => m.id === modelId);
  if (!model) throw new Error(`the price data has no ${providerId} ${modelId}`);
  // These models have one price, not one per date (which would need a date to read).
  if (Array.isArray(model.prices)) throw new Error(`${providerId} ${modelId} has prices by date`);
  return model.prices;
}

/** A rate of an entry (USD per 1M tokens) for a prompt of `prompt` tokens: a tier's price once the prompt is over its start. */
function rate(entry: ModelPrice, key: string, prompt = 0): number | undefined {
  const r = entry[key];
  if (r === undefined || typeof r === 'number') return r;
  return [...r.tiers].filter((t) => prompt > t.start).sort((a, b) => a.start - b.start).at(-1)?.price ?? r.base;
}
/** An entry's rates for a prompt of `prompt` tokens, as LlmPrice fields (a cache rate it does not list left out). */
function rates(entry: ModelPrice, prompt = 0): { input: number; output: number; cachedRead?: number; cacheWrite?: number } {
  const cachedRead = rate(entry, 'cache_read_mtok', prompt);
  const cacheWrite = rate(entry, 'cache_write_mtok', prompt);
  return {
    input: rate(entry, 'input_mtok', prompt)!, output: rate(entry, 'output_mtok', prompt)!,
    ...(cachedRead === undefined ? {} : { cachedRead }), ...(cacheWrite === undefined ? {} : { cacheWrite }),
  };
}

describe('the price data', () => {
  // First in the file: the data is loaded by no lookup before this one.
  it('is loaded at the first lookup, not on import, and a lookup never calls out', () => {
    const require = createRequire(import.meta.url);
    const entry = require.resolve('@pydantic/genai-prices');
    const fetchSpy = vi.spyOn(globalThis, 'fetch');
    try {
      expect(require.cache[entry]).toBeUndefined();
      expect(llmCost('openai/gpt-4o', { input: 1_000, output: 100 }, noOverrides)).toBeGreaterThan(0);
      expect(require.cache[entry]).toBeDefined();
      expect(fetchSpy).not.toHaveBeenCalled();
    } finally {
      fetchSpy.mockRestore();
    }
  });

  it('lists well-known models under the provider their prefix names, with the package\'s rates', () => {
    const sonnet = llmListedPrice('anthropic/claude-sonnet-4-5');
    const entry = rates(packageEntry('anthropic', 'claude-sonnet-4-5'));
    expect(sonnet).toMatchObject({ provider: 'anthropic', model: 'claude-sonnet-4-5', price: entry });
    // Anthropic's cache: reads far cheaper than input, writes dearer.
    expect(sonnet!.price.cachedRead!).toBeLessThan(sonnet!.price.input);
    expect(sonnet!.price.cacheWrite!).toBeGreaterThan(sonnet!.price.input);
    expect(sonnet!.price.output).toBeGreaterThan(sonnet!.price.input);
    // A dated snapshot is the same model.
    expect(llmListedPrice('anthropic/claude-sonnet-4-5-20250929')).toEqual(sonnet);

    const gpt4o = llmListedPrice('openai/gpt-4o');
    expect(gpt4o).toMatchObject({ provider: 'openai', model: 'gpt-4o', price: rates(packageEntry('openai', 'gpt-4o')), tiers: [] });
    expect(gpt4o!.price.cachedRead!).toBeLessThan(gpt4o!.price.input);
    expect(gpt4o!.price.cacheWrite).toBeUndefined(); // OpenAI lists no cache-write price: writes cost the input price

    const flash = llmListedPrice('google/gemini-2.5-flash');
    expect(flash).toMatchObject({ provider: 'google', model: 'gemini-2.5-flash', price: rates(packageEntry('google', 'gemini-2.5-flash')) });
    expect(flash!.price.cachedRead!).toBeLessThan(flash!.price.input);
  });

  it('lists the tiers of a model whose rates rise with the prompt\'s size', () => {
    const pro = llmListedPrice('google/gemini-2.5-pro')!;
    const entry = packageEntry('google', 'gemini-2.5-pro');
    const over = (entry.input_mtok as { tiers: Array<{ start: number }> }).tiers[0]!.start;
    expect(pro.price).toEqual(rates(entry));
    expect(pro.tiers).toEqual([{ promptOver: over, price: rates(entry, over + 1) }]);
    expect(pro.tiers[0]!.price.input).toBeGreaterThan(pro.price.input);
    expect(pro.tiers[0]!.price.output).toBeGreaterThan(pro.price.output);
  });
});

describe('llmCost', () => {
  it('is the tokens times the package\'s rates, the cached parts priced apart', () => {
    const r = rates(packageEntry('anthropic', 'claude-sonnet-4-5'));
    const usage = { input: 10_000, output: 500, cachedRead: 6_000, cacheWrite: 2_000 };
    expect(llmCost('anthropic/claude-sonnet-4-5', usage, noOverrides))
      .toBeCloseTo((2_000 * r.input + 6_000 * r.cachedRead! + 2_000 * r.cacheWrite! + 500 * r.output) / 1e6, 12);
    // Reading the same prompt from the cache costs less than sending it; writing it there costs more.
    const plain = llmCost('anthropic/claude-sonnet-4-5', { input: 10_000, output: 500 }, noOverrides)!;
    expect(llmCost('anthropic/claude-sonnet-4-5', { input: 10_000, output: 500, cachedRead: 8_000 }, noOverrides)!).toBeLessThan(plain);
    expect(llmCost('anthropic/claude-sonnet-4-5', { input: 10_000, output: 500, cacheWrite: 8_000 }, noOverrides)!).toBeGreaterThan(plain);

    // OpenAI lists no cache-write price: written tokens cost the input price.
    const g = rates(packageEntry('openai', 'gpt-4.1'));
    expect(llmCost('openai/gpt-4.1', { input: 10_000, output: 0, cachedRead: 6_000 }, noOverrides)).toBeCloseTo((4_000 * g.input + 6_000 * g.cachedRead!) / 1e6, 12);
    expect(llmCost('openai/gpt-4.1', { input: 10_000, output: 0, cacheWrite: 6_000 }, noOverrides)).toBeCloseTo(10_000 * g.input / 1e6, 12);
  });

  it('prices every token of a long prompt at its tier\'s rates', () => {
    const entry = packageEntry('google', 'gemini-2.5-pro');
    const over = (entry.input_mtok as { tiers: Array<{ start: number }> }).tiers[0]!.start;
    const prompt = over + 50_000;
    const t = rates(entry, prompt);
    expect(llmCost('google/gemini-2.5-pro', { input: prompt, output: 1_000, cachedRead: 50_000 }, noOverrides))
      .toBeCloseTo(((prompt - 50_000) * t.input + 50_000 * t.cachedRead! + 1_000 * t.output) / 1e6, 12);
    const short = rates(entry, over);
    expect(llmCost('google/gemini-2.5-pro', { input: over, output: 1_000 }, noOverrides)).toBeCloseTo((over * short.input + 1_000 * short.output) / 1e6, 12);
  });

  it('prices a bare name as OpenAI\'s only when the price data reads it as OpenAI\'s', () => {
    expect(llmCost('gpt-4o', { input: 5_000, output: 700 }, noOverrides)).toBe(llmCost('openai/gpt-4o', { input: 5_000, output: 700 }, noOverrides));
    expect(llmPriceOf('gpt-4o', noOverrides)).toEqual(llmListedPrice('openai/gpt-4o')!.price);
    // Names the OpenAI-compatible endpoint gets that are not OpenAI's: a local model, another provider's, a gateway's.
    for (const model of ['llama3', 'meta-llama/Llama-3.1-8B-Instruct', 'claude-sonnet-4-5', 'openrouter/gpt-4o', 'text-moderation-latest']) {
      expect(llmCost(model, { input: 1, output: 1 }, noOverrides), model).toBeNull();
    }
  });

  it('is null for a model with no price (cost unknown), never 0', () => {
    for (const model of ['mystery-model', 'anthropic/gpt-4o', 'openai/claude-sonnet-4-5', 'google/no-such-model', 'openai/', 'toString', 'openai/toString', 'toString/gpt-4o']) {
      expect(llmCost(model, { input: 1, output: 1 }, noOverrides), model).toBeNull();
      expect(llmPriceOf(model, noOverrides), model).toBeUndefined();
    }
    expect(llmCost('local', { input: 5, output: 5 }, llmPrices('{"local":{"input":0,"output":0}}'))).toBe(0);
  });

  it('charges cached parts over the input as they are, never a negative remainder', () => {
    const g = rates(packageEntry('openai', 'gpt-4o'));
    expect(llmCost('openai/gpt-4o', { input: 100, output: 0, cachedRead: 1_000 }, noOverrides)).toBeCloseTo(1_000 * g.cachedRead! / 1e6, 12);
    expect(llmCost('house', { input: 100, output: 0, cachedRead: 1_000 }, llmPrices('{"house":{"input":1,"output":1,"cachedRead":0.1}}'))).toBeCloseTo(1_000 * 0.1 / 1e6, 12);
  });

  it('refuses token counts that are not numbers of tokens, naming the field', () => {
    expect(() => llmCost('gpt-4o', { input: -1, output: 0 }, noOverrides)).toThrow('usage.input must be a non-negative number of tokens, got -1');
    expect(() => llmCost('gpt-4o', { input: 1, output: 0, cachedRead: Number.NaN }, noOverrides)).toThrow('usage.cachedRead must be a non-negative number of tokens, got NaN');
  });
});

describe('llmPrices: DAGENT_LLM_PRICES over the price data', () => {
  it('replaces a listed model\'s price and adds models, cached parts priced apart', () => {
    const prices = llmPrices('{"anthropic/claude-sonnet-4-5":{"input":1,"output":2,"cachedRead":0.5,"cacheWrite":4},"house":{"input":0.5,"output":2}}');
    expect(prices).toEqual({ 'anthropic/claude-sonnet-4-5': { input: 1, output: 2, cachedRead: 0.5, cacheWrite: 4 }, house: { input: 0.5, output: 2 } });
    expect(llmPriceOf('anthropic/claude-sonnet-4-5', prices)).toEqual({ input: 1, output: 2, cachedRead: 0.5, cacheWrite: 4 });
    expect(llmCost('anthropic/claude-sonnet-4-5', { input: 10_000, output: 1_000, cachedRead: 5_000, cacheWrite: 2_000 }, prices))
      .toBeCloseTo((3_000 * 1 + 5_000 * 0.5 + 2_000 * 4 + 1_000 * 2) / 1e6, 12);
    // An entry without cache prices charges its cached tokens the input price.
    expect(llmCost('house', { input: 1_000, output: 0, cachedRead: 400, cacheWrite: 100 }, prices)).toBeCloseTo(1_000 * 0.5 / 1e6, 12);
    // Models it does not name keep the price data's price.
    expect(llmCost('openai/gpt-4o', { input: 1_000, output: 10 }, prices)).toBe(llmCost('openai/gpt-4o', { input: 1_000, output: 10 }, noOverrides));
    expect(llmPrices('')).toEqual({});
  });

  it('finds an entry by the name as given, then without its provider/ prefix; the prefixed entry wins', () => {
    const bare = llmPrices('{"claude-sonnet-4-5":{"input":7,"output":7}}');
    expect(llmCost('anthropic/claude-sonnet-4-5', { input: 1_000_000, output: 0 }, bare)).toBeCloseTo(7, 12);
    const both = llmPrices('{"gpt-4o":{"input":3,"output":12},"openai/gpt-4o":{"input":5,"output":20}}');
    expect(llmCost('openai/gpt-4o', { input: 1_000_000, output: 0 }, both)).toBeCloseTo(5, 12);
    expect(llmCost('gpt-4o', { input: 1_000_000, output: 0 }, both)).toBeCloseTo(3, 12);
    // A gateway's name the price data does not know, priced by the bare entry.
    expect(llmCost('openrouter/gpt-4o', { input: 1_000_000, output: 0 }, both)).toBeCloseTo(3, 12);
    // One prefix only, and none that is empty.
    expect(llmPriceOf('azure/openai/gpt-4o', llmPrices('{"gpt-4o":{"input":3,"output":12}}'))).toBeUndefined();
    expect(llmPriceOf('/gpt-4o', llmPrices('{"gpt-4o":{"input":3,"output":12}}'))).toBeUndefined();
  });

  it('reads the variable by default', () => {
    const before = process.env.DAGENT_LLM_PRICES;
    process.env.DAGENT_LLM_PRICES = '{"from-env":{"input":1,"output":1},"openai/gpt-4o":{"input":9,"output":9}}';
    try {
      expect(llmCost('from-env', { input: 1_000_000, output: 0 })).toBeCloseTo(1, 12);
      expect(llmCost('openai/gpt-4o', { input: 1_000_000, output: 0 })).toBeCloseTo(9, 12);
      expect(llmPriceOf('openai/gpt-4o')).toEqual({ input: 9, output: 9 });
    } finally {
      if (before === undefined) delete process.env.DAGENT_LLM_PRICES;
      else process.env.DAGENT_LLM_PRICES = before;
    }
  });

  it('refuses bad input with an error naming the model and the field', () => {
    const cases: Array<[string, string]> = [
      ['{not json', 'DAGENT_LLM_PRICES is not valid JSON: '],
      ['[1]', 'DAGENT_LLM_PRICES must be a JSON object {"model": {"input": usdPer1M, "output": usdPer1M}}'],
      ['{"m":3}', 'DAGENT_LLM_PRICES["m"] must be an object {"input": usdPer1M, "output": usdPer1M}'],
      ['{"m":{"input":1}}', 'DAGENT_LLM_PRICES["m"].output must be a non-negative number (USD per 1M tokens), got nothing'],
      ['{"m":{"input":-1,"output":1}}', 'DAGENT_LLM_PRICES["m"].input must be a non-negative number (USD per 1M tokens), got -1'],
      ['{"m":{"input":1,"output":1,"cachedRead":"0.1"}}', 'DAGENT_LLM_PRICES["m"].cachedRead must be a non-negative number (USD per 1M tokens), got "0.1"'],
      ['{"m":{"input":1,"output":1,"cacheWrite":null}}', 'DAGENT_LLM_PRICES["m"].cacheWrite must be a non-negative number (USD per 1M tokens), got null'],
      ['{"m":{"input":1,"output":1,"cached_read":0.1}}', 'DAGENT_LLM_PRICES["m"].cached_read is not a price field: use input, output, cachedRead, cacheWrite'],
    ];
    for (const [json, message] of cases) {
      expect(() => llmPrices(json), json).toThrow(expect.objectContaining({ code: 'INVALID_INPUT', message: expect.stringContaining(message) }));
    }
    expect(() => llmPrices('{"m":{"input":1}}', 'prices.json')).toThrow('prices.json["m"].output must be');
  });
});
