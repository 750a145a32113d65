import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { pino } from 'pino';
import { testDatabase } from '../helpers/db.js';
import { envKept } from '../helpers/env.js';
import { dagCreate, databaseReset, taskStatusByKey } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { AgentRunner } from '../../src/runtime/agent-runner.js';
import llm, { LLM_MAX_OUTPUT_TOKENS_DEFAULT, llmConfigProblem } from '../../agents/llm.js';
import { LLM_PROVIDERS, llmProviderOf } from '../../agents/llm-providers.js';
import { answer, fault, llmServerStart } from '../helpers/llm-server/index.js';

// The llm agent against stand-ins speaking Anthropic's Messages and Google's generateContent protocols, streamed as
// the agent always asks (OpenAI's chat completions and Responses: test/agents/llm.test.ts). Each model name's prefix
// chooses the provider.
const database = await testDatabase();
const { db } = database;
const provider = await llmServerStart();
const runners: AgentRunner[] = [];

const ENV_KEYS = ['DAGENT_LLM_PRICES', 'DAGENT_LLM_MODEL', 'DAGENT_LLM_MAX_OUTPUT_TOKENS', ...LLM_PROVIDERS.flatMap((p) => [...p.keyEnv, ...p.baseUrlEnv])];
const env = envKept(ENV_KEYS);

beforeEach(async () => {
  await databaseReset(db);
  provider.reset();
  env.clear();
  Object.assign(process.env, {
    DAGENT_LLM_ANTHROPIC_BASE_URL: `${provider.origin}/v1`, ANTHROPIC_API_KEY: 'sk-ant-test',
    DAGENT_LLM_GOOGLE_BASE_URL: `${provider.origin}/v1beta`, GOOGLE_GENERATIVE_AI_API_KEY: 'g-test',
    // Prices (USD per 1M tokens) that make each part of the bill visible: input 1, cached read 0.1, cache write 1.25, output 10.
    DAGENT_LLM_PRICES: JSON.stringify({
      'anthropic/claude-test': { input: 1, cachedRead: 0.1, cacheWrite: 1.25, output: 10 },
      'gemini-test': { input: 1, cachedRead: 0.1, output: 10 },
    }),
  });
});
afterEach(async () => {
  await Promise.all(runners.splice(0).map((r) => r.stop({ graceMs: 0 })));
});
afterAll(async () => {
  await provider.close();
});

async function start(id: string) {
  const r = new AgentRunner(llm, { database, log: pino({ level: 'silent' }), id });
  runners.push(r);
  await r.start();
}
async function rows<T>(q: ReturnType<typeof sql>): Promise<T[]> {
  return (await db.execute(q)).rows as T[];
}
const oneTask = (name: string, model: string, extra = '') =>
  `name: ${name}\ntasks:\n  only: { type: llm, ${extra}spec: { constraints: { capabilities: [llm] }, prompt: hi, models: [${model}] } }\n`;

describe('llm agent on Anthropic and Google', () => {
  it('anthropic/…: POST /v1/messages with x-api-key; the text stored, cache reads and writes priced apart', async () => {
    // 10,000 tokens in, of which 8,000 read from the prompt cache and 1,000 written to it (Anthropic's input_tokens: 1,000).
    provider.script([answer.text('Herons wade.', { usage: { input: 10_000, output: 200, cacheRead: 8_000, cacheWrite: 1_000 } })]);
    const dagId = await dagCreate(db, oneTask('claude', 'anthropic/claude-test'));
    await start('llm-anthropic');
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).only === 'completed');

    const [req] = provider.seen;
    expect([req!.path, req!.headers['x-api-key'], req!.model, req!.stream]).toEqual(['/v1/messages', 'sk-ant-test', 'claude-test', true]);
    expect(req!.body.max_tokens).toBe(LLM_MAX_OUTPUT_TOKENS_DEFAULT);
    expect(req!.body.system).toEqual(expect.arrayContaining([expect.objectContaining({ text: expect.stringMatching(/DAG/) })]));
    // 10,000 in: 1,000 uncached × 1 + 8,000 read × 0.1 + 1,000 written × 1.25, and 200 out × 10, per 1M.
    const usd = (1_000 * 1 + 8_000 * 0.1 + 1_000 * 1.25 + 200 * 10) / 1e6;
    const [report] = await rows<Record<string, unknown>>(sql`
      select model, cost_usd::float8, tokens_in::int, tokens_out::int, cached_read_tokens::int, cache_write_tokens::int from usage_reports where dag_id = ${dagId}`);
    expect(report).toEqual({ model: 'anthropic/claude-test', cost_usd: expect.closeTo(usd, 12), tokens_in: 10_000, tokens_out: 200, cached_read_tokens: 8_000, cache_write_tokens: 1_000 });
    const [t] = await rows<{ output: unknown }>(sql`select output from tasks where dag_id = ${dagId}`);
    expect(t!.output).toEqual({ type: 'text', model: 'anthropic/claude-test', text: 'Herons wade.', usage: { input: 10_000, output: 200, cachedRead: 8_000 } });
  });

  it('google/…: POST /v1beta/models/{model}:streamGenerateContent with x-goog-api-key; cached content priced apart', async () => {
    provider.script([answer.text('Herons fish.', { usage: { input: 5_000, output: 300, cacheRead: 4_000 } })]);
    const dagId = await dagCreate(db, oneTask('gemini', 'google/gemini-test'));
    await start('llm-google');
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).only === 'completed');

    const [req] = provider.seen;
    expect([req!.path, req!.headers['x-goog-api-key']]).toEqual(['/v1beta/models/gemini-test:streamGenerateContent?alt=sse', 'g-test']);
    expect((req!.body.generationConfig as { maxOutputTokens?: number }).maxOutputTokens).toBe(LLM_MAX_OUTPUT_TOKENS_DEFAULT);
    expect(JSON.stringify(req!.body.contents)).toContain('hi');
    // The price is found without the prefix (llmPriceOf): 1,000 uncached × 1 + 4,000 cached × 0.1 + 300 out × 10, per 1M.
    const [report] = await rows<Record<string, unknown>>(sql`
      select model, cost_usd::float8, tokens_in::int, tokens_out::int, cached_read_tokens::int from usage_reports where dag_id = ${dagId}`);
    expect(report).toEqual({ model: 'google/gemini-test', cost_usd: expect.closeTo((1_000 + 400 + 3_000) / 1e6, 12), tokens_in: 5_000, tokens_out: 300, cached_read_tokens: 4_000 });
    const [t] = await rows<{ output: { text: string } }>(sql`select output from tasks where dag_id = ${dagId}`);
    expect(t!.output.text).toBe('Herons fish.');
  });

  it('429 from Anthropic with retry-after: the attempt is given back (rate_limited) and the model paused', async () => {
    provider.script([fault.rateLimited(9, { message: 'slow down' })]);
    const dagId = await dagCreate(db, oneTask('limited', 'anthropic/claude-test', 'retry: { strategy: fixed, initial_delay: 1s, jitter: 0 }, '));
    await start('llm-anthropic-429');
    await eventually('retrying', async () => (await taskStatusByKey(db, dagId)).only === 'retrying');
    const [a] = await rows<{ outcome: string; error_class: string; attempts: number; retry_after: number; error_message: string }>(sql`
      select a.outcome, a.error_class, t.attempts, (a.details->>'retryAfterSec')::float8 as retry_after, a.error_message
      from attempts a join tasks t on t.id = a.task_id where a.dag_id = ${dagId}`);
    expect(a).toMatchObject({ outcome: 'rate_limited', error_class: 'rate_limit', attempts: 0, retry_after: 9 });
    expect(a!.error_message).toContain('slow down');
    expect(a!.error_message).not.toContain('sk-ant-test');
    const [pause] = await rows<{ model: string }>(sql`select model from model_pauses`);
    expect(pause!.model).toBe('anthropic/claude-test');
    expect(provider.seen).toHaveLength(1); // the SDK's own retries are off: dagent's policy decides
  });

  it('a key Google refuses (400 API_KEY_INVALID, as Google answers it): auth_failure, dead-lettered after one attempt', async () => {
    provider.script([fault.unauthorized()]);
    const dagId = await dagCreate(db, oneTask('denied', 'google/gemini-test', 'max_attempts: 5, '));
    await start('llm-google-401');
    await eventually('dead-lettered', async () => (await taskStatusByKey(db, dagId)).only === 'dead_lettered');
    const [a] = await rows<{ error_class: string; error_message: string }>(sql`select error_class, error_message from attempts where dag_id = ${dagId}`);
    expect(a!.error_class).toBe('auth_failure');
    expect(a!.error_message).toMatch(/^model call failed: HTTP 400: .*API_KEY_INVALID/s);
    expect(a!.error_message).not.toContain('g-test');
    expect(provider.seen).toHaveLength(1);
  });

  it('a task whose provider has no key fails as config without a request', async () => {
    delete process.env.ANTHROPIC_API_KEY;
    const dagId = await dagCreate(db, oneTask('nokey', 'anthropic/claude-test'));
    await start('llm-nokey');
    await eventually('dead-lettered', async () => (await taskStatusByKey(db, dagId)).only === 'dead_lettered');
    expect(await rows(sql`select error_class, error_message from attempts where dag_id = ${dagId}`)).toEqual([{
      error_class: 'config', error_message: `no API key for Anthropic (anthropic/… models) at ${provider.origin}/v1: set ANTHROPIC_API_KEY`,
    }]);
    expect(provider.seen).toEqual([]);
  });
});

describe('choosing a provider by the model name', () => {
  it('anthropic/, openai/ and google/ choose their provider; other names, prefixed or not, go whole to the compatible endpoint', () => {
    const chosen = (m: string) => { const { provider: p, name } = llmProviderOf(m); return [p.prefix, name]; };
    expect(chosen('anthropic/claude-sonnet-4-5')).toEqual(['anthropic', 'claude-sonnet-4-5']);
    expect(chosen('openai/gpt-4o')).toEqual(['openai', 'gpt-4o']);
    expect(chosen('google/gemini-2.5-flash')).toEqual(['google', 'gemini-2.5-flash']);
    expect(chosen('gpt-4o')).toEqual([null, 'gpt-4o']);
    expect(chosen('meta-llama/Llama-3.1-8B-Instruct')).toEqual([null, 'meta-llama/Llama-3.1-8B-Instruct']);
  });

  it('the preflight asks for the key of each provider the served models choose; serving any model needs one usable provider', () => {
    const local = { DAGENT_LLM_BASE_URL: 'http://localhost:11434/v1' };
    expect(llmConfigProblem(local, ['anthropic/claude-test'])).toBe('no API key for Anthropic (anthropic/… models) at https://api.anthropic.com/v1: set ANTHROPIC_API_KEY');
    expect(llmConfigProblem({ ...local, ANTHROPIC_API_KEY: 'k' }, ['anthropic/claude-test', 'llama3'])).toBeUndefined();
    expect(llmConfigProblem({ ANTHROPIC_API_KEY: 'k' }, ['anthropic/claude-test', 'google/gemini-test']))
      .toBe('no API key for Google (google/… models) at https://generativelanguage.googleapis.com/v1beta: set GOOGLE_GENERATIVE_AI_API_KEY');
    expect(llmConfigProblem({ OPENAI_API_KEY: 'k' }, ['openai/gpt-4o'])).toBeUndefined();
    expect(llmConfigProblem({ DAGENT_LLM_ANTHROPIC_BASE_URL: 'nope', ANTHROPIC_API_KEY: 'k' }, ['anthropic/x'])).toBe('DAGENT_LLM_ANTHROPIC_BASE_URL is not a URL: nope');
    // Any model (`*`): one provider with its key is enough; with none, the compatible endpoint's problem is named.
    expect(llmConfigProblem({ GOOGLE_GENERATIVE_AI_API_KEY: 'k' }, ['*'])).toBeUndefined();
    expect(llmConfigProblem({ GOOGLE_GENERATIVE_AI_API_KEY: 'k', DAGENT_LLM_GOOGLE_BASE_URL: 'nope' }, ['*'])).toBe('DAGENT_LLM_GOOGLE_BASE_URL is not a URL: nope');
    expect(llmConfigProblem({}, ['*'])).toMatch(/^no API key for https:\/\/api\.openai\.com\/v1: set DAGENT_LLM_API_KEY \(or OPENAI_API_KEY\)/);
  });
});

describe('the providers in the docs', () => {
  it('docs/agents.md names each provider\'s prefix, keys, base URL variables and default base URL', () => {
    const docs = readFileSync('docs/agents.md', 'utf8');
    const section = docs.slice(docs.indexOf('#### Providers'), docs.indexOf('#### Pricing'));
    for (const p of LLM_PROVIDERS) {
      for (const name of [...p.keyEnv, ...p.baseUrlEnv, p.baseUrlDefault, ...(p.prefix ? [`\`${p.prefix}/…\``] : [])]) expect(section).toContain(name);
    }
  });
});
