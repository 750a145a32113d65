import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { pino, type Logger } from 'pino';
import { testDatabase } from '../helpers/db.js';
import { envKept } from '../helpers/env.js';
import { dagCreate, databaseReset, taskStatusByKey } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { AgentRunner } from '../../src/runtime/agent-runner.js';
import { TaskError } from '../../src/errors.js';
import { dagGet } from '../../src/db/queries/dags.js';
import llm, {
  LLM_MAX_OUTPUT_TOKENS_DEFAULT, llmConfigProblem, llmHttpError, llmMaxOutputTokens, llmMessages, retryAfterSec,
} from '../../agents/llm.js';
import { llmCallEstimate, llmPromptChars } from '../../src/ai-sdk/index.js';

/** A prompt of these messages as the AI SDK hands it to the model (the wrapper estimates from it). */
const promptOf = (messages: Array<{ role: 'system' | 'user'; content: string }>) => llmPromptChars({
  prompt: messages.map((m) => (m.role === 'system' ? { role: 'system' as const, content: m.content } : { role: 'user' as const, content: [{ type: 'text' as const, text: m.content }] })),
});
import { LLM_PROVIDERS, maxTokensField } from '../../agents/llm-providers.js';
import { llmPrices } from '../../src/llm-prices.js';
import { AgentFleet } from '../../src/runtime/fleet.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import { answer, fault, llmServerStart, raw } from '../helpers/llm-server/index.js';

const database = await testDatabase();
const { db } = database;
const silent = pino({ level: 'silent' });
const runners: AgentRunner[] = [];

async function start(id: string, log: Logger = silent): Promise<AgentRunner> {
  const r = new AgentRunner(llm, { database, log, id });
  runners.push(r);
  await r.start();
  return r;
}

async function rows<T>(q: ReturnType<typeof sql>): Promise<T[]> {
  return (await db.execute(q)).rows as T[];
}

// A stand-in provider: records every request, answers each with the reply `provider.reply` gives for it, rendered in
// the request's protocol and streamed, as the agent always asks.
const provider = await llmServerStart();
const baseUrl = provider.baseUrl;

const ENV_KEYS = [
  'DAGENT_LLM_BASE_URL', 'DAGENT_LLM_API_KEY', 'DAGENT_LLM_MODEL', 'DAGENT_LLM_PRICES', 'DAGENT_LLM_MAX_OUTPUT_TOKENS', 'OPENAI_BASE_URL', 'OPENAI_API_KEY',
  ...LLM_PROVIDERS.flatMap((p) => [...p.keyEnv, ...p.baseUrlEnv]),
];
const env = envKept(ENV_KEYS);

beforeEach(async () => {
  await databaseReset(db);
  provider.reset();
  env.clear();
  process.env.DAGENT_LLM_BASE_URL = baseUrl;
  process.env.DAGENT_LLM_API_KEY = 'sk-test';
});
afterEach(async () => {
  await Promise.all(runners.splice(0).map((r) => r.stop({ graceMs: 0 })));
});
afterAll(async () => {
  await provider.close();
});

type AttemptRow = { key: string; attempt: number; outcome: string; error_class: string | null; model: string | null; tokens_in: number; tokens_out: number; cost_usd: number };
function attempts(dagId: string): Promise<AttemptRow[]> {
  return rows<AttemptRow>(sql`
    select t.key, a.attempt, a.outcome, a.error_class, a.model, a.tokens_in::int, a.tokens_out::int, a.cost_usd::float8
    from attempts a join tasks t on t.id = a.task_id where a.dag_id = ${dagId} order by t.key, a.attempt`);
}
function tasksOf(dagId: string) {
  return rows<{ key: string; status: string; output: unknown; cost_usd: number }>(
    sql`select key, status, output, cost_usd::float8 from tasks where dag_id = ${dagId} order by key`);
}

describe('llm agent against a chat-completions server', () => {
  it('calls the model with prompt and upstream inputs, stores the text and charges tokens × price', async () => {
    process.env.DAGENT_LLM_PRICES = JSON.stringify({ 'house-model': { input: 1, output: 2 } });
    provider.reply = (r) => (r.model === 'gpt-4o'
      ? answer.text('Herons are tall.', { usage: { input: 12_000, output: 3_000 } })
      : answer.text('Tall birds.', { usage: { input: 1_000, output: 500 } }));
    const dagId = await dagCreate(db, `
name: chat
tasks:
  research:
    type: llm
    spec:
      constraints: { capabilities: [llm] }
      prompt: List three facts about herons.
      input: { prompt: Keep each under ten words. }
      models: [gpt-4o]
  summary:
    type: llm
    depends_on: [research]
    spec: { constraints: { capabilities: [llm] }, prompt: Summarize., context: [research], models: [house-model] }
`);
    await start('llm-ok');
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');

    const researchOut = { type: 'text', model: 'gpt-4o', text: 'Herons are tall.', usage: { input: 12_000, output: 3_000, cachedRead: 0 } };
    expect(await tasksOf(dagId)).toEqual([
      { key: 'research', status: 'completed', output: researchOut, cost_usd: 0.06 }, // 12k × 2.5/1M + 3k × 10/1M
      { key: 'summary', status: 'completed', output: { type: 'text', model: 'house-model', text: 'Tall birds.', usage: { input: 1_000, output: 500, cachedRead: 0 } }, cost_usd: 0.002 },
    ]);
    expect((await dagGet(db, dagId))!.spentUsd).toBeCloseTo(0.062, 6);
    expect(await attempts(dagId)).toEqual([
      { key: 'research', attempt: 1, outcome: 'completed', error_class: null, model: 'gpt-4o', tokens_in: 12_000, tokens_out: 3_000, cost_usd: 0.06 },
      { key: 'summary', attempt: 1, outcome: 'completed', error_class: null, model: 'house-model', tokens_in: 1_000, tokens_out: 500, cost_usd: 0.002 },
    ]);

    expect(provider.seen.map((s) => [s.path, s.authorization, s.model, s.stream])).toEqual([
      ['/v1/chat/completions', 'Bearer sk-test', 'gpt-4o', true],
      ['/v1/chat/completions', 'Bearer sk-test', 'house-model', true],
    ]);
    const [first, second] = provider.seen;
    // A local endpoint gets the output cap as max_tokens, the field every compatible server reads.
    expect(first!.body.max_tokens).toBe(LLM_MAX_OUTPUT_TOKENS_DEFAULT);
    expect(first!.body.max_completion_tokens).toBeUndefined();
    // A streamed chat completion reports its usage only when asked to: without it no tokens would be charged.
    expect(first!.body.stream_options).toEqual({ include_usage: true });
    expect(first!.messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(first!.messages[0]!.content).toMatch(/DAG/);
    expect(first!.messages[1]!.content).toBe('List three facts about herons.\n\nKeep each under ten words.');
    const user = second!.messages[1]!.content;
    expect(user.startsWith('Summarize.')).toBe(true);
    expect(JSON.parse(user.slice(user.indexOf('{')))).toEqual({ research: researchOut });
  });

  it('falls back to OPENAI_BASE_URL, OPENAI_API_KEY and DAGENT_LLM_MODEL when the task names no model', async () => {
    env.clear();
    Object.assign(process.env, { OPENAI_BASE_URL: `${baseUrl}/`, OPENAI_API_KEY: 'sk-openai', DAGENT_LLM_MODEL: 'gpt-4o-mini' });
    provider.reply = () => answer.text('ok', { usage: { input: 1_000_000, output: 0 } });
    const dagId = await dagCreate(db, 'name: env\ntasks:\n  only: { type: llm, spec: { constraints: { capabilities: [llm] }, prompt: hi } }\n');
    await start('llm-env');
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).only === 'completed');
    expect(provider.seen.map((s) => [s.path, s.authorization, s.model])).toEqual([['/v1/chat/completions', 'Bearer sk-openai', 'gpt-4o-mini']]);
    expect((await tasksOf(dagId))[0]!.cost_usd).toBeCloseTo(0.15, 6);
  });

  it('429: gives the attempt back (rate_limited), READY again no sooner than Retry-After, and the model paused for the fleet', async () => {
    provider.reply = () => fault.rateLimited(7);
    const dagId = await dagCreate(db, `
name: limited
tasks:
  only: { type: llm, retry: { strategy: fixed, initial_delay: 1s, jitter: 0 }, spec: { constraints: { capabilities: [llm] }, prompt: hi, models: [gpt-4o] } }
`);
    await start('llm-429');
    await eventually('retrying', async () => (await taskStatusByKey(db, dagId)).only === 'retrying');
    const [a] = await attempts(dagId);
    expect(a).toMatchObject({ attempt: 1, outcome: 'rate_limited', error_class: 'rate_limit', model: 'gpt-4o' });
    expect(provider.seen).toHaveLength(1);
    const [t] = await rows<{ delay: number; attempts: number; details: { retryAfterSec: number; retry_after_sec: number } }>(sql`
      select extract(epoch from t.run_at - a.ended_at)::float8 as delay, t.attempts, a.details
      from tasks t join attempts a on a.task_id = t.id where t.dag_id = ${dagId}`);
    expect([t!.details.retryAfterSec, t!.details.retry_after_sec, t!.attempts]).toEqual([7, 7, 0]);
    expect(t!.delay).toBeGreaterThan(6.5);
    expect(t!.delay).toBeLessThan(7.5);
    const [pause] = await rows<{ model: string; left: number }>(sql`select model, extract(epoch from until - now())::float8 as left from model_pauses`);
    expect(pause!.model).toBe('gpt-4o');
    expect(pause!.left).toBeGreaterThan(5);
  });

  it('401: fails as auth_failure and dead-letters after one attempt', async () => {
    provider.reply = () => fault.unauthorized();
    const dagId = await dagCreate(db, `
name: denied
tasks:
  only: { type: llm, max_attempts: 5, spec: { constraints: { capabilities: [llm] }, prompt: hi, models: [gpt-4o] } }
`);
    await start('llm-401');
    await eventually('dead-lettered', async () => (await taskStatusByKey(db, dagId)).only === 'dead_lettered');
    expect((await attempts(dagId)).map((a) => a.error_class)).toEqual(['auth_failure']);
    const [dl] = await rows<{ error_class: string; attempts: number }>(sql`select error_class, attempts from dead_letters where dag_id = ${dagId}`);
    expect(dl).toEqual({ error_class: 'auth_failure', attempts: 1 });
    expect(provider.seen).toHaveLength(1);
  });

  it('switches to the fallback model on the third attempt after provider errors', async () => {
    provider.reply = (r) => (r.model === 'model-a' ? fault.serverError() : answer.text('from b', { usage: { input: 10, output: 5 } }));
    const dagId = await dagCreate(db, `
name: fallback
tasks:
  only:
    type: llm
    max_attempts: 3
    retry: { strategy: immediate }
    spec: { constraints: { capabilities: [llm] }, prompt: hi, models: [model-a], fallback_models: [model-b] }
`);
    await start('llm-fallback');
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).only === 'completed');
    // A call that failed with a provider error recorded no answer: the next attempt, the same prompt, calls again.
    expect(provider.seen.map((s) => s.model)).toEqual(['model-a', 'model-a', 'model-b']);
    expect((await attempts(dagId)).map((a) => [a.attempt, a.outcome, a.error_class, a.model])).toEqual([
      [1, 'failed', 'provider_error', 'model-a'],
      [2, 'failed', 'provider_error', 'model-a'],
      [3, 'completed', null, 'model-b'],
    ]);
    const [t] = await tasksOf(dagId);
    expect(t).toMatchObject({ output: { model: 'model-b', text: 'from b' }, cost_usd: 0 }); // model-b has no price
  });

  it('classifies bad requests, provider errors, missing content and missing configuration', async () => {
    // A stream that begins an answer, then sends an event that is no JSON: the SDK cannot read it, and no usage comes.
    const unreadableStream = raw.handle((_req, res) => {
      const chunk = { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'unreadable', choices: [{ index: 0, delta: { role: 'assistant', content: 'Half an answer' }, finish_reason: null }] };
      res.writeHead(200, { 'content-type': 'text/event-stream' }).end(`data: ${JSON.stringify(chunk)}\n\ndata: {"choices": [{"delta"\n\ndata: [DONE]\n\n`);
    });
    provider.reply = (r) => {
      if (r.model === 'rejected') return raw.json(400, { error: { message: 'unknown parameter', type: 'invalid_request_error', param: null, code: null } });
      if (r.model === 'flaky') return fault.overloaded();
      if (r.model === 'unreadable') return unreadableStream;
      return answer.parts([], { usage: { input: 7, output: 0 } }); // an answer with no text
    };
    const dagId = await dagCreate(db, `
name: faults
tasks:
  rejected: { type: llm, retry: { initial_delay: 1h }, spec: { constraints: { capabilities: [llm] }, prompt: hi, models: [rejected] } }
  flaky: { type: llm, retry: { initial_delay: 1h }, spec: { constraints: { capabilities: [llm] }, prompt: hi, models: [flaky] } }
  empty: { type: llm, retry: { initial_delay: 1h }, spec: { constraints: { capabilities: [llm] }, prompt: hi, models: [gpt-4o] } }
  nomodel: { type: llm, retry: { initial_delay: 1h }, spec: { constraints: { capabilities: [llm] }, prompt: hi } }
  unreadable: { type: llm, retry: { initial_delay: 1h }, spec: { constraints: { capabilities: [llm] }, prompt: hi, models: [unreadable] } }
`);
    await start('llm-faults');
    const want = { rejected: 'dead_lettered', flaky: 'retrying', empty: 'retrying', nomodel: 'dead_lettered', unreadable: 'retrying' };
    await eventually('all five failed once', async () => {
      const s = await taskStatusByKey(db, dagId);
      return Object.entries(want).every(([k, v]) => s[k] === v);
    });
    expect(await taskStatusByKey(db, dagId)).toEqual(want);
    // The provider bills a stream that broke off before its usage came: it is charged at an estimate, the prompt's
    // characters / 4 in and the text received / 4 out ('Half an answer': 14 characters, 4 tokens).
    const unreadableIn = Math.ceil(promptOf(llmMessages({ key: 'unreadable', spec: { prompt: 'hi', context: [], models: [], fallbackModels: [], input: {} }, inputs: {} })) / 4);
    expect((await attempts(dagId)).map((a) => [a.key, a.error_class, a.tokens_in, a.tokens_out])).toEqual([
      ['empty', 'invalid_output', 7, 0], // tokens spent on an unusable answer are still charged
      ['flaky', 'provider_error', 0, 0],
      ['nomodel', 'config', 0, 0],
      ['rejected', 'bad_request', 0, 0],
      ['unreadable', 'invalid_output', unreadableIn, 4],
    ]);
    expect(unreadableIn).toBeGreaterThan(20); // the system message alone is over 80 characters
    const messages = Object.fromEntries((await rows<{ key: string; error_message: string }>(sql`
      select t.key, a.error_message from attempts a join tasks t on t.id = a.task_id where a.dag_id = ${dagId}`)).map((a) => [a.key, a.error_message]));
    expect(messages.empty).toBe('gpt-4o answered no text (finish reason stop)');
    expect(messages.rejected).toContain('HTTP 400: {"error":{"message":"unknown parameter"');
    expect(messages.flaky).toContain('HTTP 503');
    expect(messages.unreadable).toMatch(/^unreadable answer from unreadable: JSON parsing failed/);
    expect(provider.seen.map((s) => s.model).sort()).toEqual(['flaky', 'gpt-4o', 'rejected', 'unreadable']);
  });

  it('fails as provider_unreachable when nothing listens at the base URL', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    process.env.DAGENT_LLM_BASE_URL = `http://127.0.0.1:${port}/v1`;
    const dagId = await dagCreate(db, `
name: offline
tasks:
  only: { type: llm, retry: { initial_delay: 1h }, spec: { constraints: { capabilities: [llm] }, prompt: hi, models: [gpt-4o] } }
`);
    await start('llm-offline');
    await eventually('retrying', async () => (await taskStatusByKey(db, dagId)).only === 'retrying');
    expect((await attempts(dagId)).map((a) => a.error_class)).toEqual(['provider_unreachable']);
  });

  it('aborts the HTTP request when the task passes max_duration_sec', async () => {
    let disconnected = false;
    provider.reply = (r) => r.res.on('close', () => { disconnected = !r.res.writableEnded; }); // never answers
    const dagId = await dagCreate(db, `
name: slow
tasks:
  only: { type: llm, max_attempts: 1, spec: { constraints: { capabilities: [llm], max_duration_sec: 1 }, prompt: hi, models: [gpt-4o] } }
`);
    await start('llm-slow');
    await eventually('timed out', async () => (await taskStatusByKey(db, dagId)).only === 'dead_lettered');
    expect((await attempts(dagId)).map((a) => a.error_class)).toEqual(['timeout']);
    await eventually('provider saw the client go away', async () => disconnected, 5_000);
  });

  it('records an unpriced model at an unknown cost (NULL in the ledger, never 0), its tokens counted, and warns about it once', async () => {
    const lines: string[] = [];
    const log = pino({ level: 'warn' }, new Writable({ write(chunk, _enc, cb) { lines.push(String(chunk)); cb(); } }));
    provider.reply = () => answer.text('ok', { usage: { input: 100, output: 100 } });
    const dagId = await dagCreate(db, `
name: unpriced
tasks:
  a: { type: llm, spec: { constraints: { capabilities: [llm] }, prompt: hi, models: [mystery-model] } }
  b: { type: llm, spec: { constraints: { capabilities: [llm] }, prompt: hi, models: [mystery-model] } }
`);
    await start('llm-unpriced', log);
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    expect(await rows(sql`select model, cost_usd, tokens_in::int, tokens_out::int from usage_reports where dag_id = ${dagId}`))
      .toEqual([{ model: 'mystery-model', cost_usd: null, tokens_in: 100, tokens_out: 100 }, { model: 'mystery-model', cost_usd: null, tokens_in: 100, tokens_out: 100 }]);
    expect((await attempts(dagId)).map((a) => [a.model, a.tokens_in])).toEqual([['mystery-model', 100], ['mystery-model', 100]]);
    const warnings = lines.map((l) => JSON.parse(l) as { msg: string; model?: string }).filter((l) => l.model === 'mystery-model');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toBe('no price for this model: its cost is recorded as unknown, its tokens still count (set DAGENT_LLM_PRICES)');
  });

  it('openai/…: POST /v1/responses; the input tokens OpenAI\'s prompt cache served are priced apart and kept as cached_read_tokens', async () => {
    // 10,000 in, 8,000 of them from the cache, 1,000 out, on gpt-4o: 2,000 × 2.5/1M + 8,000 × 1.25/1M + 1,000 × 10/1M.
    provider.reply = () => answer.text('cached', { usage: { input: 10_000, output: 1_000, cacheRead: 8_000 } });
    // `openai/` chooses OpenAI's own provider (its Responses API), pointed at the stand-in.
    Object.assign(process.env, { DAGENT_LLM_OPENAI_BASE_URL: baseUrl, OPENAI_API_KEY: 'sk-openai' });
    const dagId = await dagCreate(db, 'name: cached\ntasks:\n  only: { type: llm, spec: { constraints: { capabilities: [llm] }, prompt: hi, models: [openai/gpt-4o] } }\n');
    await start('llm-cached');
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).only === 'completed');
    expect(await rows(sql`select model, cost_usd::float8, tokens_in::int, tokens_out::int, cached_read_tokens::int, cache_write_tokens::int from usage_reports where dag_id = ${dagId}`))
      .toEqual([{ model: 'openai/gpt-4o', cost_usd: 0.025, tokens_in: 10_000, tokens_out: 1_000, cached_read_tokens: 8_000, cache_write_tokens: 0 }]);
    expect(provider.seen.map((s) => [s.path, s.authorization, s.model, s.stream])).toEqual([['/v1/responses', 'Bearer sk-openai', 'gpt-4o', true]]);
    expect(provider.seen[0]!.body.max_output_tokens).toBe(LLM_MAX_OUTPUT_TOKENS_DEFAULT);
    const [t] = await tasksOf(dagId);
    expect(t).toMatchObject({ cost_usd: 0.025, output: { usage: { input: 10_000, output: 1_000, cachedRead: 8_000 } } });
  });

  it('makes no request when one call\'s estimate does not fit the task\'s max_cost_usd: the attempt fails budget_exceeded and dead-letters', async () => {
    // gpt-4o: up to 1,000 tokens out at $10/M is $0.01, over a max cost of $0.005 before any input is counted.
    process.env.DAGENT_LLM_MAX_OUTPUT_TOKENS = '1000';
    provider.reply = () => answer.text('should not be asked', { usage: { input: 10, output: 10 } });
    const dagId = await dagCreate(db, `
name: too-dear
tasks:
  only: { type: llm, max_attempts: 3, spec: { constraints: { capabilities: [llm], max_cost_usd: 0.005 }, prompt: hi, models: [gpt-4o] } }
`);
    await start('llm-too-dear');
    await eventually('dead-lettered', async () => (await taskStatusByKey(db, dagId)).only === 'dead_lettered');
    expect(provider.seen).toEqual([]);
    const [a] = await rows<{ error_class: string; error_message: string; model: string | null }>(sql`
      select a.error_class, a.error_message, a.model from attempts a where a.dag_id = ${dagId}`);
    const estimate = llmCallEstimate('gpt-4o', promptOf(llmMessages({ key: 'only', spec: { prompt: 'hi', context: [], models: [], fallbackModels: [], input: {} }, inputs: {} })), 1000, llmPrices(undefined));
    expect(a).toEqual({
      error_class: 'budget_exceeded', model: 'gpt-4o',
      error_message: `no call to gpt-4o: it may spend $${Number(estimate.usd!.toFixed(6))} and ${estimate.inputTokens + 1000} tokens (${estimate.inputTokens} estimated in, up to 1000 out); the attempt has $0.005 left`,
    });
    expect(await rows(sql`select count(*)::int as n from usage_reports where dag_id = ${dagId}`)).toEqual([{ n: 0 }]);
  });

  it('holds an unpriced model to the task\'s max_tokens: an estimate over it makes no request', async () => {
    provider.reply = () => answer.text('should not be asked', { usage: { input: 10, output: 10 } });
    const dagId = await dagCreate(db, `
name: too-long
tasks:
  only: { type: llm, max_attempts: 1, spec: { constraints: { capabilities: [llm], max_tokens: 1000 }, prompt: hi, models: [mystery-model] } }
`);
    await start('llm-too-long');
    await eventually('dead-lettered', async () => (await taskStatusByKey(db, dagId)).only === 'dead_lettered');
    expect(provider.seen).toEqual([]);
    const [a] = await rows<{ error_class: string; error_message: string }>(sql`select error_class, error_message from attempts where dag_id = ${dagId}`);
    expect(a!.error_class).toBe('budget_exceeded');
    expect(a!.error_message).toMatch(/^no call to mystery-model: it may spend an unknown cost \(no price\) and \d+ tokens \(\d+ estimated in, up to 4096 out\); the attempt has 1000 tokens left$/);
  });

  it('once earlier tasks have nearly spent the DAG\'s budget, the next task\'s call is not made', async () => {
    // Each call: input free, up to 10 tokens out at $1,000/M: estimated and charged $0.01. Two fit in $0.025, a third does not.
    process.env.DAGENT_LLM_PRICES = JSON.stringify({ 'house-model': { input: 0, output: 1_000 } });
    process.env.DAGENT_LLM_MAX_OUTPUT_TOKENS = '10';
    provider.reply = () => answer.text('step', { usage: { input: 50, output: 10 } });
    const dagId = await dagCreate(db, `
name: three-steps
budget_usd: 0.025
tasks:
  one: { type: llm, spec: { constraints: { capabilities: [llm] }, prompt: first, models: [house-model] } }
  two: { type: llm, depends_on: [one], spec: { constraints: { capabilities: [llm] }, prompt: second, models: [house-model] } }
  three: { type: llm, depends_on: [two], max_attempts: 1, spec: { constraints: { capabilities: [llm] }, prompt: third, models: [house-model] } }
`);
    await start('llm-dag-budget');
    await eventually('three dead-lettered', async () => (await taskStatusByKey(db, dagId)).three === 'dead_lettered');
    expect(provider.seen.map((s) => s.messages[1]!.content.split('\n')[0])).toEqual(['first', 'second']);
    expect(provider.seen.map((s) => s.body.max_tokens)).toEqual([10, 10]);
    expect((await attempts(dagId)).map((a) => [a.key, a.outcome, a.error_class, a.cost_usd])).toEqual([
      ['one', 'completed', null, 0.01], ['three', 'failed', 'budget_exceeded', 0], ['two', 'completed', null, 0.01],
    ]);
    const [three] = await rows<{ error_message: string }>(sql`select a.error_message from attempts a join tasks t on t.id = a.task_id where t.dag_id = ${dagId} and t.key = 'three'`);
    expect(three!.error_message).toMatch(/^no call to house-model: it may spend \$0\.01 and \d+ tokens .*; the attempt has \$0\.005 left$/);
    expect((await dagGet(db, dagId))!.spentUsd).toBeCloseTo(0.02, 9);
  });
});

describe('llm agent pieces', () => {
  it('estimates a call before making it: the prompt\'s characters / 4 rounded up in, the output cap out, at the model\'s price', () => {
    const messages = [{ role: 'system' as const, content: 'x'.repeat(10) }, { role: 'user' as const, content: 'y'.repeat(3) }];
    expect(llmCallEstimate('gpt-4o', promptOf(messages), 1_000, llmPrices(undefined))).toEqual({ inputTokens: 4, outputTokens: 1_000, usd: (4 * 2.5 + 1_000 * 10) / 1e6 });
    expect(llmCallEstimate('mystery', promptOf(messages), 1_000, llmPrices(undefined))).toEqual({ inputTokens: 4, outputTokens: 1_000, usd: null });
    expect(llmMaxOutputTokens(undefined)).toBe(LLM_MAX_OUTPUT_TOKENS_DEFAULT);
    expect(llmMaxOutputTokens('256')).toBe(256);
    expect(readFileSync('docs/agents.md', 'utf8')).toContain(`| \`DAGENT_LLM_MAX_OUTPUT_TOKENS\` | \`${LLM_MAX_OUTPUT_TOKENS_DEFAULT}\` |`);
    for (const bad of ['0', '-5', '1.5', 'lots', '1e3']) {
      expect(() => llmMaxOutputTokens(bad)).toThrow(expect.objectContaining({ errorClass: 'config', retryable: false, message: `DAGENT_LLM_MAX_OUTPUT_TOKENS must be a positive whole number of tokens, got "${bad}"` }));
    }
  });

  it('caps the output with max_completion_tokens on OpenAI\'s hosts (its reasoning models refuse max_tokens), max_tokens elsewhere', () => {
    expect(maxTokensField('https://api.openai.com/v1')).toBe('max_completion_tokens');
    expect(maxTokensField('https://my-team.openai.azure.com/openai/deployments/x')).toBe('max_completion_tokens');
    expect(maxTokensField('http://localhost:11434/v1')).toBe('max_tokens');
    expect(maxTokensField('https://gateway.example/v1')).toBe('max_tokens');
  });

  it('maps HTTP statuses to error classes, reading Retry-After as seconds or a date', () => {
    const classOf = (e: TaskError) => [e.errorClass, e.retryable];
    expect(classOf(llmHttpError(429, ''))).toEqual(['rate_limit', true]);
    expect(llmHttpError(429, '', '7').details.retryAfterSec).toBe(7);
    expect(classOf(llmHttpError(401, ''))).toEqual(['auth_failure', false]);
    expect(classOf(llmHttpError(403, ''))).toEqual(['auth_failure', false]);
    expect(classOf(llmHttpError(404, 'no such model'))).toEqual(['bad_request', false]);
    expect(classOf(llmHttpError(502, ''))).toEqual(['provider_error', true]);
    expect(classOf(llmHttpError(408, ''))).toEqual(['provider_error', true]);
    expect(llmHttpError(500, 'x'.repeat(10_000)).message.length).toBeLessThan(400);
    expect(retryAfterSec('Wed, 21 Oct 2015 07:28:30 GMT', Date.parse('Wed, 21 Oct 2015 07:28:00 GMT'))).toBe(30);
    expect(retryAfterSec('soon')).toBeUndefined();
    expect(retryAfterSec(null)).toBeUndefined();
  });

  it('builds messages without an inputs section when the task has no upstream inputs', () => {
    const spec = { prompt: 'hi', context: [], models: [], fallbackModels: [], input: {} };
    expect(llmMessages({ key: 'k', spec, inputs: {} })[1]).toEqual({ role: 'user', content: 'hi' });
    expect(() => llmMessages({ key: 'k', spec: { ...spec, prompt: undefined }, inputs: {} })).toThrow(expect.objectContaining({ errorClass: 'bad_request' }));
  });
});

describe('the llm agents\' preflight', () => {
  it('an HTTPS endpoint off this machine needs a key; plain HTTP on the network and this machine do not', () => {
    expect(llmConfigProblem({ DAGENT_LLM_BASE_URL: 'https://api.openai.com/v1' })).toMatch(/^no API key for https:\/\/api\.openai\.com\/v1: set DAGENT_LLM_API_KEY/);
    expect(llmConfigProblem({})).toMatch(/^no API key for https:\/\/api\.openai\.com\/v1/);
    expect(llmConfigProblem({ OPENAI_API_KEY: 'sk-x' })).toBeUndefined();
    expect(llmConfigProblem({ DAGENT_LLM_BASE_URL: 'http://ollama:11434/v1' })).toBeUndefined();
    expect(llmConfigProblem({ DAGENT_LLM_BASE_URL: 'https://localhost:8443/v1' })).toBeUndefined();
    expect(llmConfigProblem({ DAGENT_LLM_BASE_URL: 'not a url' })).toBe('DAGENT_LLM_BASE_URL is not a URL: not a url');
    // A price table or an output cap that does not read stops the agent at start, not each task.
    expect(llmConfigProblem({ OPENAI_API_KEY: 'sk-x', DAGENT_LLM_PRICES: '{"m":{"input":1,"output":"2"}}' })).toBe('DAGENT_LLM_PRICES["m"].output must be a non-negative number (USD per 1M tokens), got "2"');
    expect(llmConfigProblem({ OPENAI_API_KEY: 'sk-x', DAGENT_LLM_MAX_OUTPUT_TOKENS: 'many' })).toBe('DAGENT_LLM_MAX_OUTPUT_TOKENS must be a positive whole number of tokens, got "many"');
  });

  it('in a fleet (dagent up), an agent whose preflight fails is left out and named; the others start', async () => {
    const ready = defineAgent({ name: 'ready', capabilities: [], async run() { return null; } });
    const unready = defineAgent({ name: 'unready', capabilities: [], preflight: () => 'no API key for https://x.example/v1', async run() { return null; } });
    const fleet = new AgentFleet(database, [{ def: ready, id: 'ready-1' }, { def: unready, id: 'unready-1' }], { log: pino({ level: 'silent' }) });
    const skipped: string[] = [];
    try {
      await fleet.start({ onUnready: (m) => skipped.push(m) });
      expect(skipped).toEqual(['agent unready cannot start: no API key for https://x.example/v1']);
      expect(fleet.runners.map((r) => r.id)).toEqual(['ready-1']);
      const ids = (await database.db.execute<{ id: string }>(sql`select id from agents order by id`)).rows.map((r) => r.id);
      expect(ids).toContain('ready-1');
      expect(ids).not.toContain('unready-1');
    } finally {
      await fleet.stop(0);
    }
    // Alone (dagent agent run), it stops the command.
    const alone = new AgentFleet(database, [{ def: unready, id: 'unready-2' }], { log: pino({ level: 'silent' }) });
    await expect(alone.start()).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await alone.stop(0);
  });
});
