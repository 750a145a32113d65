import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { LLM_PRICES, llmCost, llmPriceOf, llmPrices } from '../src/llm-prices.js';

const builtIn = llmPrices(undefined);

describe('llmCost', () => {
  it('prices tokens per million, input and output', () => {
    expect(llmCost('gpt-4o', { input: 1_000_000, output: 1_000_000 }, builtIn)).toBeCloseTo(12.5, 12);
    expect(llmCost('gpt-4o-mini', { input: 2_000, output: 1_000 }, builtIn)).toBeCloseTo(0.0009, 12);
  });

  it('prices the cached parts of the input apart: the input price applies to input − cachedRead − cacheWrite', () => {
    // gpt-4.1: input $2, cached input $0.5, output $8; no cacheWrite price, so writes cost the input price.
    expect(llmCost('gpt-4.1', { input: 10_000, output: 0, cachedRead: 6_000 }, builtIn)).toBeCloseTo((4_000 * 2 + 6_000 * 0.5) / 1e6, 12);
    expect(llmCost('gpt-4.1', { input: 10_000, output: 0, cacheWrite: 6_000 }, builtIn)).toBeCloseTo(10_000 * 2 / 1e6, 12);
    const prices = llmPrices('{"claude-x":{"input":3,"output":15,"cachedRead":0.3,"cacheWrite":3.75}}');
    expect(llmCost('claude-x', { input: 10_000, output: 1_000, cachedRead: 5_000, cacheWrite: 2_000 }, prices))
      .toBeCloseTo((3_000 * 3 + 5_000 * 0.3 + 2_000 * 3.75 + 1_000 * 15) / 1e6, 12);
    // An entry without cache prices charges its cached tokens at the input price.
    expect(llmCost('plain', { input: 1_000, output: 0, cachedRead: 400, cacheWrite: 100 }, llmPrices('{"plain":{"input":1,"output":1}}'))).toBeCloseTo(0.001, 12);
    // Cached parts over the input (a provider counting them apart): charged as they are, no negative remainder.
    expect(llmCost('gpt-4o', { input: 100, output: 0, cachedRead: 1_000 }, builtIn)).toBeCloseTo(1_000 * 1.25 / 1e6, 12);
  });

  it('has the OpenAI cached-input prices, and no cache-write price of its own (writes cost the input price there)', () => {
    expect(Object.fromEntries(Object.entries(LLM_PRICES).map(([m, p]) => [m, [p.input, p.cachedRead, p.output, p.cacheWrite]]))).toEqual({
      'gpt-4o': [2.5, 1.25, 10, undefined],
      'gpt-4o-mini': [0.15, 0.075, 0.6, undefined],
      'gpt-4.1': [2, 0.5, 8, undefined],
      'gpt-4.1-mini': [0.4, 0.1, 1.6, undefined],
      'gpt-4.1-nano': [0.1, 0.025, 0.4, undefined],
      'o3-mini': [1.1, 0.55, 4.4, undefined],
    });
  });

  it('docs/agents.md shows the built-in table as it is', () => {
    const doc = readFileSync('docs/agents.md', 'utf8');
    const table = doc.slice(doc.indexOf('| Model | input | cached input | output |')).split('\n\n')[0]!.split('\n').slice(2);
    const shown = Object.fromEntries(table.map((row) => {
      const [model, input, cached, output] = row.split('|').slice(1, -1).map((c) => c.trim().replaceAll('`', ''));
      return [model, { input: Number(input), cachedRead: Number(cached), output: Number(output) }];
    }));
    expect(shown).toEqual(LLM_PRICES);
  });

  it('is null for a model with no price (cost unknown), never 0; exact names only, no inherited keys', () => {
    expect(llmCost('mystery-model', { input: 1, output: 1 }, builtIn)).toBeNull();
    expect(llmCost('gpt-4o-2024-05-13', { input: 1, output: 1 }, builtIn)).toBeNull();
    expect(llmCost('toString', { input: 1, output: 1 }, builtIn)).toBeNull();
    expect(llmCost('openai/toString', { input: 1, output: 1 }, builtIn)).toBeNull();
    expect(llmCost('local', { input: 5, output: 5 }, llmPrices('{"local":{"input":0,"output":0}}'))).toBe(0);
  });

  it('looks a model up as named, then without a leading provider/ prefix', () => {
    expect(llmCost('openai/gpt-4o', { input: 1_000_000, output: 0 }, builtIn)).toBeCloseTo(2.5, 12);
    expect(llmPriceOf('openai/gpt-4o-mini', builtIn)).toEqual(LLM_PRICES['gpt-4o-mini']);
    // One prefix only, and none that is empty.
    expect(llmPriceOf('azure/openai/gpt-4o', builtIn)).toBeUndefined();
    expect(llmPriceOf('/gpt-4o', builtIn)).toBeUndefined();
    // An entry for the prefixed name wins over the bare one.
    const prices = llmPrices('{"openrouter/gpt-4o":{"input":3,"output":12}}');
    expect(llmCost('openrouter/gpt-4o', { input: 1_000_000, output: 0 }, prices)).toBeCloseTo(3, 12);
    expect(llmCost('other/gpt-4o', { input: 1_000_000, output: 0 }, prices)).toBeCloseTo(2.5, 12);
  });

  it('refuses token counts that are not numbers of tokens, naming the field', () => {
    expect(() => llmCost('gpt-4o', { input: -1, output: 0 }, builtIn)).toThrow('usage.input must be a non-negative number of tokens, got -1');
    expect(() => llmCost('gpt-4o', { input: 1, output: 0, cachedRead: Number.NaN }, builtIn)).toThrow('usage.cachedRead must be a non-negative number of tokens, got NaN');
  });
});

describe('llmPrices: DAGENT_LLM_PRICES over the built-in table', () => {
  it('overrides and extends the table, with optional cache prices', () => {
    const prices = llmPrices('{"gpt-4o":{"input":1,"output":1},"house":{"input":0.5,"output":2,"cachedRead":0.05}}');
    expect(prices['gpt-4o']).toEqual({ input: 1, output: 1 });
    expect(prices.house).toEqual({ input: 0.5, output: 2, cachedRead: 0.05 });
    expect(prices['gpt-4.1']).toEqual(LLM_PRICES['gpt-4.1']);
    expect(llmPrices('')).toEqual({ ...LLM_PRICES });
  });

  it('reads the variable by default', () => {
    const before = process.env.DAGENT_LLM_PRICES;
    process.env.DAGENT_LLM_PRICES = '{"from-env":{"input":1,"output":1}}';
    try {
      expect(llmCost('from-env', { input: 1_000_000, output: 0 })).toBeCloseTo(1, 12);
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
