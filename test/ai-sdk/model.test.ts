import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { pino } from 'pino';
import { testDatabase } from '../helpers/db.js';
import { dagCreate, databaseReset, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { answer, fault, llmServerStart, type Protocol } from '../helpers/llm-server/index.js';
import { AgentRunner } from '../../src/runtime/agent-runner.js';
import { defineAgent, type AgentDefinition } from '../../src/runtime/define-agent.js';
import { llmCost, llmPrices } from '../../src/llm-prices.js';
import { dagentModel } from '../../src/ai-sdk/index.js';
import { LIMITS } from '../../src/config/limits.js';

// dagentModel against local servers speaking each provider's protocol: every call a durable step (a retry replays
// it and pays nothing), its text in the task's stream, its usage (cached tokens apart) charged, provider failures
// as dagent's error classes.
const database = await testDatabase();
const { db } = database;
const silent = pino({ level: 'silent' });
const provider = await llmServerStart();
const runners: AgentRunner[] = [];

/** A model on `protocol` at the stand-in, and the name dagent prices it by. */
function modelOn(protocol: Protocol) {
  const at = { baseURL: provider.baseUrl, apiKey: 'test-key' };
  switch (protocol) {
    case 'openai-chat': return { model: createOpenAI(at).chat('gpt-4o'), name: 'openai/gpt-4o' };
    case 'openai-responses': return { model: createOpenAI(at).responses('gpt-4o'), name: 'openai/gpt-4o' };
    case 'anthropic': return { model: createAnthropic(at).messages('claude-test'), name: 'anthropic/claude-test' };
    case 'google': return { model: createGoogleGenerativeAI({ baseURL: provider.googleBaseUrl, apiKey: 'test-key' }).chat('gemini-test'), name: 'google/gemini-test' };
  }
}

async function run(agent: AgentDefinition, id = agent.name): Promise<void> {
  const r = new AgentRunner(agent, { database, log: silent, id });
  runners.push(r);
  await r.start();
}

/** One task of `type`: `constraints`, `task` and `spec` are more fields of each (`, max_cost_usd: 0.02`). */
const DAG = (type: string, constraints = '', task = '', spec = '') =>
  `name: ${type}\ndefaults: { max_attempts: 3, retry: { strategy: immediate } }\ntasks:\n  t: { type: ${type}${task}, spec: { constraints: { capabilities: [${type}]${constraints} }${spec} } }\n`;
const taskOf = async (dagId: string) => (await rowsOf<{ id: string; status: string; output: unknown }>(db, sql`select id, status, output from tasks where dag_id = ${dagId}`))[0]!;
const spend = async (dagId: string) => (await rowsOf<{ tokens_in: number; tokens_out: number; cached: number; writes: number; usd: number | null }>(db, sql`
  select coalesce(sum(tokens_in), 0)::int as tokens_in, coalesce(sum(tokens_out), 0)::int as tokens_out, coalesce(sum(cached_read_tokens), 0)::int as cached,
    coalesce(sum(cache_write_tokens), 0)::int as writes, sum(cost_usd)::float8 as usd from usage_reports where dag_id = ${dagId}`))[0]!;
const streamed = async (taskId: string) => (await rowsOf<{ fence: number; text: string }>(db, sql`
  select fence, string_agg(data, '' order by seq) as text from task_stream_chunks where task_id = ${taskId} and name = 'output' group by fence order by fence`));

const PRICES = JSON.stringify({
  'openai/gpt-4o': { input: 2.5, output: 10, cachedRead: 1.25 },
  'anthropic/claude-test': { input: 3, output: 15, cachedRead: 0.3, cacheWrite: 3.75 },
  'google/gemini-test': { input: 1, output: 4, cachedRead: 0.25 },
});

beforeEach(async () => {
  await databaseReset(db);
  provider.seen = [];
  provider.script([]);
  process.env.DAGENT_LLM_PRICES = PRICES;
});
afterEach(async () => {
  await Promise.all(runners.splice(0).map((r) => r.stop({ graceMs: 0 })));
});
afterAll(async () => {
  delete process.env.DAGENT_LLM_PRICES;
  await provider.close();
});

describe('dagentModel on each provider\'s protocol', () => {
  for (const protocol of ['openai-chat', 'openai-responses', 'anthropic', 'google'] as const) {
    it(`${protocol}: streamText's deltas reach the task's stream as they come, the usage with its cached tokens is charged at the model's price, the call is one step`, async () => {
      const usage = protocol === 'anthropic' ? { input: 1200, output: 40, cacheRead: 800, cacheWrite: 100 } : { input: 1200, output: 40, cacheRead: 800 };
      provider.script([answer.text('Queues in Postgres use SKIP LOCKED to hand out work.', { usage, chunkChars: 6 })]);
      const { model, name } = modelOn(protocol);
      await run(defineAgent({
        name: 'streamer', capabilities: ['streamer'],
        async run(_task, ctx) {
          const result = streamText({ model: dagentModel(model, ctx, { name }), prompt: 'How do queues hand out work?', maxRetries: 0 });
          return { text: await result.text };
        },
      }));
      const dagId = await dagCreate(db, DAG('streamer'));
      await eventually('completed', async () => (await taskOf(dagId)).status === 'completed');
      const t = await taskOf(dagId);
      expect(t.output).toEqual({ text: 'Queues in Postgres use SKIP LOCKED to hand out work.' });
      expect((await streamed(t.id)).map((s) => s.text)).toEqual(['Queues in Postgres use SKIP LOCKED to hand out work.']);
      // The stream got the deltas as they came: more than one chunk was sent (6 characters a delta).
      expect(provider.seen).toHaveLength(1);
      expect(provider.seen[0]!.stream).toBe(true);
      const tokens = { input: 1200, output: 40, cachedRead: 800, cacheWrite: usage.cacheWrite ?? 0 };
      expect(await spend(dagId)).toEqual({ tokens_in: 1200, tokens_out: 40, cached: 800, writes: tokens.cacheWrite, usd: expect.closeTo(llmCost(name, tokens, llmPrices())!, 9) });
      // Cached tokens are priced apart: the same call with no cache costs more.
      expect(llmCost(name, tokens, llmPrices())!).toBeLessThan(llmCost(name, { input: 1200, output: 40 }, llmPrices())!);
      const steps = await rowsOf<{ name: string; cost_usd: number }>(db, sql`select name, cost_usd::float8 as cost_usd from task_steps where task_id = ${t.id}`);
      expect(steps).toEqual([{ name: expect.stringMatching(new RegExp(`^model call 1 ${name} [0-9a-f]{16}$`)), cost_usd: expect.closeTo(llmCost(name, tokens, llmPrices())!, 9) }]);
    });
  }

  it('a retry replays the calls recorded before the failure and pays only for the one that failed', async () => {
    provider.script([
      answer.text('outline: three parts', { usage: { input: 100, output: 20 } }),
      fault.serverError(),
      answer.text('the essay', { usage: { input: 150, output: 300 } }),
    ]);
    const { model, name } = modelOn('anthropic');
    await run(defineAgent({
      name: 'writer', capabilities: ['writer'],
      async run(_task, ctx) {
        const m = dagentModel(model, ctx, { name });
        const outline = await generateText({ model: m, prompt: 'Outline an essay.', maxRetries: 0 });
        const essay = await generateText({ model: m, prompt: `Write it: ${outline.text}`, maxRetries: 0 });
        return { outline: outline.text, essay: essay.text };
      },
    }));
    const dagId = await dagCreate(db, DAG('writer'));
    await eventually('completed', async () => (await taskOf(dagId)).status === 'completed');
    const t = await taskOf(dagId);
    expect(t.output).toEqual({ outline: 'outline: three parts', essay: 'the essay' });
    // Three requests: the outline once (replayed by attempt 2, not sent again), the essay twice (the 500, then the answer).
    expect(provider.seen.map((s) => JSON.stringify(s.body).includes('Write it'))).toEqual([false, true, true]);
    const attempts = await rowsOf<{ attempt: number; outcome: string; error_class: string | null }>(db, sql`
      select attempt, outcome, error_class from attempts where task_id = ${t.id} order by attempt`);
    expect(attempts).toEqual([{ attempt: 1, outcome: 'failed', error_class: 'provider_error' }, { attempt: 2, outcome: 'completed', error_class: null }]);
    // Charged once per answered call: 100 + 150 in, 20 + 300 out.
    expect(await spend(dagId)).toMatchObject({ tokens_in: 250, tokens_out: 320 });
    // The second attempt's stream has both answers: the replayed one is written again.
    expect((await streamed(t.id)).map((s) => s.text)).toEqual(['outline: three parts', 'outline: three partsthe essay']);
  });

  it('an answer too large to record as a step (over LIMITS.stepResultBytes) is used unrecorded, not lost, and the attempt says so', async () => {
    const big = 'x'.repeat(LIMITS.stepResultBytes + 1000);
    provider.script([answer.text(big, { chunkChars: 64 * 1024 })]);
    const { model, name } = modelOn('openai-chat');
    await run(defineAgent({
      name: 'big', capabilities: ['big'],
      async run(_task, ctx) {
        const r = await generateText({ model: dagentModel(model, ctx, { name, stream: false }), prompt: 'a lot', maxRetries: 0 });
        return { length: r.text.length };
      },
    }));
    const dagId = await dagCreate(db, DAG('big'));
    await eventually('completed', async () => (await taskOf(dagId)).status === 'completed');
    const t = await taskOf(dagId);
    expect(t.output).toEqual({ length: big.length });
    expect(await rowsOf(db, sql`select name from task_steps where task_id = ${t.id}`)).toEqual([]);
    const warned = await rowsOf<{ message: string }>(db, sql`select message from attempt_logs where task_id = ${t.id} and level = 'warn'`);
    expect(warned.map((w) => w.message)).toContain('model call answered but not recorded: a retry will make it again');
  });

  it('asks the budget before each call: a call that would pass max_cost_usd is not made', async () => {
    // Each call is estimated at up to 1,000 output tokens at $15/M ($0.015) plus its prompt: one fits in $0.02, two do not.
    provider.script([answer.text('first', { usage: { input: 10, output: 900 } }), answer.text('never sent')]);
    const { model, name } = modelOn('anthropic');
    await run(defineAgent({
      name: 'spender', capabilities: ['spender'],
      async run(_task, ctx) {
        const m = dagentModel(model, ctx, { name, maxOutputTokens: 1000 });
        await generateText({ model: m, prompt: 'one', maxRetries: 0 });
        await generateText({ model: m, prompt: 'two', maxRetries: 0 });
        return 'both';
      },
    }));
    const dagId = await dagCreate(db, DAG('spender', ', max_cost_usd: 0.02'));
    await eventually('dead-lettered', async () => (await taskStatusByKey(db, dagId)).t === 'dead_lettered');
    expect(provider.seen).toHaveLength(1);
    expect(provider.seen[0]!.body.max_tokens).toBe(1000);
    const [a] = await rowsOf<{ error_class: string; error_message: string }>(db, sql`select error_class, error_message from attempts where dag_id = ${dagId}`);
    expect(a!.error_class).toBe('budget_exceeded');
    expect(a!.error_message).toMatch(/^no call to anthropic\/claude-test: it may spend \$[\d.]+ and \d+ tokens \(\d+ estimated in, up to 1000 out\); the attempt has \$[\d.]+ left$/);
  });

  it('a stream cut mid-answer fails provider_unreachable, charges the estimate of what was sent, and the retry\'s stream has the whole answer', async () => {
    const text = 'Work is claimed with FOR UPDATE SKIP LOCKED so that two workers never take the same row.';
    provider.script([fault.cut(answer.text(text, { chunkChars: 10 }), 5), answer.text(text, { usage: { input: 30, output: 25 } })]);
    const { model, name } = modelOn('openai-chat');
    await run(defineAgent({
      name: 'cut', capabilities: ['cut'],
      async run(_task, ctx) {
        // A cut stream: the SDK rejects the text with the error the wrapper raised (provider_unreachable).
        const result = streamText({ model: dagentModel(model, ctx, { name }), prompt: 'How is work claimed?', maxRetries: 0, onError: () => {} });
        return await result.text;
      },
    }));
    const dagId = await dagCreate(db, DAG('cut'));
    await eventually('completed', async () => (await taskOf(dagId)).status === 'completed');
    const t = await taskOf(dagId);
    expect(t.output).toBe(text);
    const attempts = await rowsOf<{ outcome: string; error_class: string | null; tokens_out: number }>(db, sql`
      select outcome, error_class, tokens_out::int from attempts where task_id = ${t.id} order by attempt`);
    expect(attempts.map((a) => [a.outcome, a.error_class])).toEqual([['failed', 'provider_unreachable'], ['completed', null]]);
    // The cut attempt was charged an estimate (the text it received / 4 out), not nothing.
    expect(attempts[0]!.tokens_out).toBeGreaterThan(0);
    const [first, second] = await streamed(t.id);
    expect(text.startsWith(first!.text) && first!.text.length < text.length).toBe(true);
    expect(second!.text).toBe(text);
  });

  for (const protocol of ['openai-chat', 'openai-responses', 'anthropic', 'google'] as const) {
    it(`${protocol}: maps a 429 to rate_limit with its Retry-After (Google's: RetryInfo in the body): no attempt spent, the model paused for the fleet`, async () => {
      provider.script([fault.rateLimited(7)]);
      const { model, name } = modelOn(protocol);
      await run(defineAgent({
        name: 'limited', capabilities: ['limited'], models: [name],
        async run(_task, ctx) {
          return (await generateText({ model: dagentModel(model, ctx, { name }), prompt: 'something', maxRetries: 0 })).text;
        },
      }));
      const dagId = await dagCreate(db, DAG('limited', '', '', `, models: [${name}]`));
      await eventually('rate limited', async () => (await taskStatusByKey(db, dagId)).t === 'retrying');
      const [a] = await rowsOf<{ outcome: string; error_class: string; retry_after: number }>(db, sql`
        select outcome, error_class, (details->>'retryAfterSec')::int as retry_after from attempts where dag_id = ${dagId}`);
      expect(a).toEqual({ outcome: 'rate_limited', error_class: 'rate_limit', retry_after: 7 });
      const [t] = await rowsOf<{ attempts: number; wait: number }>(db, sql`select attempts, extract(epoch from run_at - now())::float8 as wait from tasks where dag_id = ${dagId}`);
      expect(t!.attempts).toBe(0);
      expect(t!.wait).toBeGreaterThan(4);
      const paused = await rowsOf<{ model: string }>(db, sql`select model from model_pauses where until > now()`);
      expect(paused).toEqual([{ model: name }]);
    });
  }

  for (const protocol of ['openai-chat', 'openai-responses', 'anthropic', 'google'] as const) {
    it(`${protocol}: an error the provider sends inside a begun stream is classed by its type (overloaded: provider_error; rate limit: rate_limit)`, async () => {
      provider.script([fault.failMidStream(answer.text('Half of it and then'), 2, 'overloaded'), fault.failMidStream(answer.text('again'), 2, 'rate_limit')]);
      const { model, name } = modelOn(protocol);
      await run(defineAgent({
        name: 'midstream', capabilities: ['midstream'],
        async run(_task, ctx) {
          return await streamText({ model: dagentModel(model, ctx, { name }), prompt: 'go', maxRetries: 0, onError: () => {} }).text;
        },
      }));
      const dagId = await dagCreate(db, DAG('midstream'));
      await eventually('two attempts', async () => (await rowsOf(db, sql`select 1 from attempts where dag_id = ${dagId}`)).length === 2, 20_000);
      const attempts = await rowsOf<{ error_class: string; error_message: string }>(db, sql`select error_class, error_message from attempts where dag_id = ${dagId} order by ended_at`);
      expect(attempts.map((a) => a.error_class)).toEqual(['provider_error', 'rate_limit']);
      // The AI SDK's Responses provider turns the stream's error event into an API error of its own (status 500, the
      // event as its body); the others hand over the provider's JSON.
      expect(attempts[0]!.error_message).toMatch(protocol === 'openai-responses'
        ? /^model call failed: HTTP 500: \{"type":"error".*server_error/
        : new RegExp(`^model call failed mid-answer \\(${name.replace('/', '\\/')}\\): \\{`));
    });
  }

  it('maps a refusal to refusal, its tokens charged, and the provider\'s words in the message', async () => {
    provider.script([answer.refusal('I cannot help with that.', { usage: { input: 12, output: 6 } })]);
    const { model, name } = modelOn('anthropic');
    await run(defineAgent({
      name: 'refused', capabilities: ['refused'],
      async run(_task, ctx) {
        return (await generateText({ model: dagentModel(model, ctx, { name }), prompt: 'something', maxRetries: 0 })).text;
      },
    }));
    const dagId = await dagCreate(db, DAG('refused', '', ', retry: { strategy: immediate, no_retry_on: [refusal] }'));
    await eventually('dead-lettered', async () => (await taskStatusByKey(db, dagId)).t === 'dead_lettered');
    const attempts = await rowsOf<{ outcome: string; error_class: string; error_message: string; tokens_in: number }>(db, sql`
      select outcome, error_class, error_message, tokens_in::int from attempts where dag_id = ${dagId}`);
    expect(attempts).toEqual([{ outcome: 'failed', error_class: 'refusal', error_message: 'anthropic/claude-test refused (finish reason refusal): I cannot help with that.', tokens_in: 12 }]);
  });
  it('a stream that goes silent is abandoned after idleTimeoutMs as provider_unreachable, its text so far already in the task\'s stream, and the retry answers', async () => {
    const text = 'Leases end the claims of agents that stopped answering, so their work is claimed again.';
    provider.script([fault.stall(answer.text(text, { chunkChars: 10 }), 4), answer.text(text, { usage: { input: 30, output: 25 } })]);
    const { model, name } = modelOn('anthropic');
    await run(defineAgent({
      name: 'stalled', capabilities: ['stalled'],
      async run(_task, ctx) {
        return await streamText({ model: dagentModel(model, ctx, { name, idleTimeoutMs: 2000 }), prompt: 'What is a lease?', maxRetries: 0, onError: () => {} }).text;
      },
    }));
    const dagId = await dagCreate(db, DAG('stalled'));
    const t0 = await taskOf(dagId);
    // While the first call hangs, the deltas it did send are already in the attempt's stream: text goes out as it comes.
    await eventually('the first deltas streamed while the call is open', async () => {
      const [first] = await streamed(t0.id);
      return first !== undefined && first.text.length > 0 && (await taskOf(dagId)).status === 'running';
    });
    expect(provider.seen).toHaveLength(1);
    await eventually('completed', async () => (await taskOf(dagId)).status === 'completed', 20_000);
    const attempts = await rowsOf<{ outcome: string; error_class: string | null; error_message: string | null }>(db, sql`
      select outcome, error_class, error_message from attempts where task_id = ${t0.id} order by attempt`);
    expect(attempts.map((a) => [a.outcome, a.error_class])).toEqual([['failed', 'provider_unreachable'], ['completed', null]]);
    expect(attempts[0]!.error_message).toBe(`${name} sent nothing for 2 s: the call was abandoned`);
    expect((await taskOf(dagId)).output).toBe(text);
  });

  it('a call that does not stream and does not answer is abandoned after callTimeoutMs as provider_unreachable', async () => {
    provider.script([fault.hang(), answer.text('late but here')]);
    const { model, name } = modelOn('openai-chat');
    await run(defineAgent({
      name: 'hung', capabilities: ['hung'],
      async run(_task, ctx) {
        return (await generateText({ model: dagentModel(model, ctx, { name, callTimeoutMs: 1000 }), prompt: 'anything', maxRetries: 0 })).text;
      },
    }));
    const dagId = await dagCreate(db, DAG('hung'));
    await eventually('completed', async () => (await taskOf(dagId)).status === 'completed', 20_000);
    const attempts = await rowsOf<{ outcome: string; error_class: string | null }>(db, sql`
      select outcome, error_class from attempts where dag_id = ${dagId} order by attempt`);
    expect(attempts).toEqual([{ outcome: 'failed', error_class: 'provider_unreachable' }, { outcome: 'completed', error_class: null }]);
    expect((await taskOf(dagId)).output).toBe('late but here');
  });

  for (const protocol of ['openai-chat', 'openai-responses', 'anthropic', 'google'] as const) {
    it(`${protocol}: a prompt too long is context_length and a refusal is refusal, each with the provider's words`, async () => {
      // Google blocks with finish reason SAFETY and no text; the others say why.
      provider.script([fault.contextTooLong(), answer.refusal('I will not do that.', { usage: { input: 5, output: 3 } })]);
      const { model, name } = modelOn(protocol);
      await run(defineAgent({
        name: 'classes', capabilities: ['classes'],
        async run(_task, ctx) {
          return await streamText({ model: dagentModel(model, ctx, { name }), prompt: 'go', maxRetries: 0, onError: () => {} }).text;
        },
      }));
      const dagId = await dagCreate(db, DAG('classes', '', ', retry: { strategy: immediate, no_retry_on: [refusal] }'));
      await eventually('dead-lettered', async () => (await taskStatusByKey(db, dagId)).t === 'dead_lettered', 20_000);
      const attempts = await rowsOf<{ error_class: string; error_message: string }>(db, sql`select error_class, error_message from attempts where dag_id = ${dagId} order by attempt`);
      expect(attempts.map((a) => a.error_class)).toEqual(['context_length', 'refusal']);
      expect(attempts[1]!.error_message).toMatch(new RegExp(`^${name.replace('/', '\\/')} refused \\(finish reason [\\w-]+\\)${protocol === 'google' ? '' : ': I will not do that\\.'}$`));
      expect(attempts[0]!.error_message).toMatch(/^model call failed: HTTP 400: .*(context|too long|exceeds)/i);
    });
  }
});
