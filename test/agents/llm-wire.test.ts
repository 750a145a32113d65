import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { APICallError, generateText, jsonSchema, Output, stepCountIs, streamText, tool, type JSONSchema7, type LanguageModel, type TextStreamPart, type ToolSet } from 'ai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { answer, fault, llmServerStart, raw, type FailureKind, type Protocol } from '../helpers/llm-server/index.js';

// The stand-in provider (test/helpers/llm-server/) is only worth what its protocols are: here the AI SDK's own
// providers call it, streamed and not, and must read every answer, tool call, usage, refusal and error it sends.
const server = await llmServerStart();
// The compatible provider warns that it cannot send a schema (asserted below); the warning is no news here.
(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;
beforeEach(() => server.reset());
afterAll(() => server.close());

interface Provider {
  name: string;
  protocol: Protocol;
  model: () => LanguageModel;
  /** The request header carrying the key. */
  key: [header: string, value: string];
  /** Where the request says which JSON schema the answer must follow, as this provider's API asks for it. */
  schemaSent: (body: Record<string, unknown>) => unknown;
  /** The tool result the follow-up request sends back, as this provider's API carries it. */
  toolResultSent: (body: Record<string, unknown>) => unknown;
  /** How many events a stream sends before its first text delta (so a fault can come after some text). */
  eventsBeforeText: number;
  /** Each failure's status, and a phrase of its body as the provider really phrases it. */
  errors: Record<'rate_limit' | 'auth' | 'context_length', [status: number, phrase: string]>;
}

// Request bodies, read field by field as each provider's API lays them out.
type Json = Record<string, any>;
const openaiErrors: Provider['errors'] = { rate_limit: [429, 'rate_limit_exceeded'], auth: [401, 'invalid_api_key'], context_length: [400, '"code":"context_length_exceeded"'] };
const chatToolResult = (b: Json) => JSON.parse(b.messages.find((m: Json) => m.role === 'tool').content);

const PROVIDERS: Provider[] = [
  {
    name: 'OpenAI chat completions', protocol: 'openai-chat', key: ['authorization', 'Bearer sk-test'],
    model: () => createOpenAI({ baseURL: server.baseUrl, apiKey: 'sk-test' }).chat('gpt-4o'),
    schemaSent: (b: Json) => b.response_format?.type === 'json_schema' && b.response_format.json_schema.schema,
    toolResultSent: chatToolResult, errors: openaiErrors, eventsBeforeText: 1, // the chunk with the role
  },
  {
    name: 'OpenAI Responses', protocol: 'openai-responses', key: ['authorization', 'Bearer sk-test'],
    model: () => createOpenAI({ baseURL: server.baseUrl, apiKey: 'sk-test' }).responses('gpt-4o'),
    schemaSent: (b: Json) => b.text?.format?.type === 'json_schema' && b.text.format.schema,
    toolResultSent: (b: Json) => JSON.parse(b.input.find((i: Json) => i.type === 'function_call_output').output), errors: openaiErrors,
    eventsBeforeText: 4, // response.created, response.in_progress, response.output_item.added, response.content_part.added
  },
  {
    name: 'Anthropic Messages', protocol: 'anthropic', key: ['x-api-key', 'sk-ant-test'],
    model: () => createAnthropic({ baseURL: server.baseUrl, apiKey: 'sk-ant-test' }).messages('claude-sonnet-4-5'),
    schemaSent: (b: Json) => b.output_config?.format?.type === 'json_schema' && b.output_config.format.schema,
    toolResultSent: (b: Json) => JSON.parse(b.messages.at(-1).content.find((c: Json) => c.type === 'tool_result').content),
    eventsBeforeText: 3, // message_start, content_block_start, ping
    errors: { rate_limit: [429, 'rate_limit_error'], auth: [401, 'authentication_error'], context_length: [400, '"type":"invalid_request_error","message":"prompt is too long'] },
  },
  {
    name: 'Google generateContent', protocol: 'google', key: ['x-goog-api-key', 'g-test'],
    model: () => createGoogleGenerativeAI({ baseURL: server.googleBaseUrl, apiKey: 'g-test' }).chat('gemini-2.5-flash'),
    schemaSent: (b: Json) => b.generationConfig?.responseMimeType === 'application/json' && b.generationConfig.responseJsonSchema,
    toolResultSent: (b: Json) => b.contents.at(-1).parts[0].functionResponse.response.content,
    eventsBeforeText: 0,
    // Google refuses a bad key with 400 INVALID_ARGUMENT (reason API_KEY_INVALID), not 401.
    errors: { rate_limit: [429, 'RESOURCE_EXHAUSTED'], auth: [400, 'API_KEY_INVALID'], context_length: [400, '"status":"INVALID_ARGUMENT"'] },
  },
  {
    name: 'OpenAI-compatible', protocol: 'openai-chat', key: ['authorization', 'Bearer sk-local'],
    model: () => createOpenAICompatible({ name: 'local', baseURL: server.baseUrl, apiKey: 'sk-local', includeUsage: true }).chatModel('llama3'),
    // Without supportsStructuredOutputs the SDK asks for JSON only (json_object), not for a schema.
    schemaSent: (b: Json) => b.response_format?.type === 'json_object' && { type: 'object', properties: { title: { type: 'string' }, score: { type: 'number' } }, required: ['title', 'score'], additionalProperties: false },
    toolResultSent: chatToolResult, errors: openaiErrors, eventsBeforeText: 1,
  },
];

const PHRASES: Record<Protocol, string> = {
  'openai-chat': "This model's maximum context length is", 'openai-responses': 'Your input exceeds the context window of this model',
  anthropic: 'prompt is too long', google: 'exceeds the maximum number of tokens',
};

const spawnInput = jsonSchema<{ name: string; count: number }>({
  type: 'object', properties: { name: { type: 'string' }, count: { type: 'number' } }, required: ['name', 'count'], additionalProperties: false,
});
const reportSchema = { type: 'object', properties: { title: { type: 'string' }, score: { type: 'number' } }, required: ['title', 'score'], additionalProperties: false } satisfies JSONSchema7;

/** Every part of a streamText run, and what its reading threw (a cut connection ends the stream with a throw). */
async function drain<T extends ToolSet>(stream: AsyncIterable<TextStreamPart<T>>) {
  const parts: TextStreamPart<T>[] = [];
  try {
    for await (const p of stream) parts.push(p);
    return { parts, thrown: undefined };
  } catch (err) {
    return { parts, thrown: err };
  }
}
const deltas = (parts: TextStreamPart<ToolSet>[]) => parts.flatMap((p) => (p.type === 'text-delta' ? [p.text] : []));
const errorsOf = (parts: TextStreamPart<ToolSet>[]) => parts.flatMap((p) => (p.type === 'error' ? [p.error] : []));

// The SDK's own retries stay off: each scripted reply answers one request.
const call = { prompt: 'Name a wading bird.', maxRetries: 0 };
const quiet = { onError: () => {} };

describe.each(PROVIDERS)('the AI SDK against the stand-in: $name', (p) => {
  it('generateText: the text, the finish reason and the usage with cached tokens; the request kept in seen', async () => {
    server.script([answer.text('Herons wade.', { usage: { input: 1_000, output: 20, cacheRead: 800 } })]);
    const r = await generateText({ model: p.model(), ...call });
    expect([r.text, r.finishReason]).toEqual(['Herons wade.', 'stop']);
    expect(r.usage).toMatchObject({ inputTokens: 1_000, outputTokens: 20, inputTokenDetails: { cacheReadTokens: 800, noCacheTokens: 200 } });
    const [req] = server.seen;
    expect([req!.protocol, req!.stream, req!.headers[p.key[0]]]).toEqual([p.protocol, false, p.key[1]]);
    expect(JSON.stringify(req!.body)).toContain('Name a wading bird.');
  });

  it('streamText: the text in several deltas, the usage from the stream\'s end', async () => {
    server.script([answer.text('Herons wade in shallow water.', { usage: { input: 500, output: 9, cacheRead: 100 } })]);
    const r = streamText({ model: p.model(), ...call });
    const { parts, thrown } = await drain(r.fullStream);
    expect(thrown).toBeUndefined();
    expect(deltas(parts).length).toBeGreaterThan(1);
    expect(deltas(parts).join('')).toBe('Herons wade in shallow water.');
    expect(await r.finishReason).toBe('stop');
    expect(await r.usage).toMatchObject({ inputTokens: 500, outputTokens: 9, inputTokenDetails: { cacheReadTokens: 100 } });
    expect(server.seen[0]!.stream).toBe(true);
  });

  for (const mode of ['generateText', 'streamText'] as const) {
    it(`${mode}: a tool loop, the call executed with its input, its result sent back, then the answer`, async () => {
      server.script([answer.toolCall('spawn', { name: 'child', count: 2 }, { usage: { input: 100, output: 10 } }), answer.text('Spawned 2.')]);
      const executed: unknown[] = [];
      const tools = { spawn: tool({ description: 'Spawn tasks', inputSchema: spawnInput, execute: async (input) => { executed.push(input); return { ok: true, ids: [1, 2] }; } }) };
      const options = { model: p.model(), ...call, tools, stopWhen: stepCountIs(3) };
      const r = mode === 'generateText' ? await generateText(options) : streamText({ ...options, ...quiet });
      expect(await r.text).toBe('Spawned 2.');
      expect(executed).toEqual([{ name: 'child', count: 2 }]);
      const steps = await r.steps;
      expect(steps.map((s) => s.finishReason)).toEqual(['tool-calls', 'stop']);
      expect(steps[0]!.toolCalls.map((c) => [c.toolName, c.input])).toEqual([['spawn', { name: 'child', count: 2 }]]);
      expect(server.seen).toHaveLength(2);
      expect(JSON.stringify(server.seen[0]!.body.tools)).toContain('spawn');
      expect(p.toolResultSent(server.seen[1]!.body)).toEqual({ ok: true, ids: [1, 2] });
    });
  }

  it('structured output (Output.object): the schema sent the provider\'s way, the object read from the answer', async () => {
    server.script([answer.text('{"title":"Herons","score":3}')]);
    const r = await generateText({ model: p.model(), ...call, output: Output.object({ schema: jsonSchema<{ title: string; score: number }>(reportSchema) }) });
    expect(r.output).toEqual({ title: 'Herons', score: 3 });
    expect(p.schemaSent(server.seen[0]!.body)).toEqual(reportSchema);
  });

  it('finish reasons: an answer cut at the token limit (length), a refusal (content-filter), streamed and not', async () => {
    server.script([answer.text('Herons', { finish: 'length' }), answer.refusal("I can't help with that."), answer.text('Herons', { finish: 'length' }), answer.refusal('No.')]);
    expect((await generateText({ model: p.model(), ...call })).finishReason).toBe('length');
    expect((await generateText({ model: p.model(), ...call })).finishReason).toBe('content-filter');
    expect(await streamText({ model: p.model(), ...call }).finishReason).toBe('length');
    expect(await streamText({ model: p.model(), ...call }).finishReason).toBe('content-filter');
  });

  it('a stream cut mid-answer: the deltas that came, then an APICallError whose cause is the dropped connection', async () => {
    server.script([fault.cut(answer.text('Herons wade in shallow water, still.'), p.eventsBeforeText + 2)]);
    const { parts, thrown } = await drain(streamText({ model: p.model(), ...call, ...quiet }).fullStream);
    expect(deltas(parts).length).toBeGreaterThan(0);
    expect(deltas(parts).join('')).not.toBe('Herons wade in shallow water, still.');
    expect(APICallError.isInstance(thrown)).toBe(true);
    expect((thrown as APICallError).cause).toBeInstanceOf(Error);
  });

  it('a non-streamed answer cut mid-body: generateText rejects', async () => {
    server.script([fault.cut(answer.text('Herons wade.'), 0)]);
    await expect(generateText({ model: p.model(), ...call })).rejects.toSatisfy((e) => APICallError.isInstance(e));
  });

  it('a stream the provider ends with its own error event after some text: an error part after the deltas', async () => {
    server.script([fault.failMidStream(answer.text('Herons wade in shallow water, still.'), p.eventsBeforeText + 2, 'overloaded')]);
    const { parts } = await drain(streamText({ model: p.model(), ...call, ...quiet }).fullStream);
    expect(deltas(parts).length).toBeGreaterThan(0);
    expect(errorsOf(parts).map((e) => (e as Error).message).join()).toMatch(/overloaded/i);
  });

  for (const kind of ['rate_limit', 'auth', 'context_length'] satisfies FailureKind[]) {
    it(`${kind}: an APICallError carrying the status, the provider's body and its headers`, async () => {
      const reply = kind === 'rate_limit' ? fault.rateLimited(7) : kind === 'auth' ? fault.unauthorized() : fault.contextTooLong();
      server.script([reply]);
      const err = await generateText({ model: p.model(), ...call }).catch((e: unknown) => e);
      expect(APICallError.isInstance(err)).toBe(true);
      const e = err as APICallError;
      const [status, phrase] = p.errors[kind];
      expect(e.statusCode).toBe(status);
      expect(e.responseBody).toContain(phrase);
      if (kind === 'context_length') expect(e.message).toContain(PHRASES[p.protocol]);
      // Google says when to come back in the body (RetryInfo), the others in a Retry-After header.
      if (kind === 'rate_limit') {
        if (p.protocol === 'google') expect(JSON.parse(e.responseBody!).error.details).toContainEqual(expect.objectContaining({ retryDelay: '7s' }));
        else expect(e.responseHeaders?.['retry-after']).toBe('7');
      }
    });
  }

  it('a streamed request refused: the error part is an APICallError with the status', async () => {
    server.script([fault.contextTooLong()]);
    const { parts } = await drain(streamText({ model: p.model(), ...call, ...quiet }).fullStream);
    const [e] = errorsOf(parts);
    expect(APICallError.isInstance(e)).toBe(true);
    expect([(e as APICallError).statusCode, (e as APICallError).message]).toEqual([400, expect.stringContaining(PHRASES[p.protocol])]);
  });

  it('a script: the first request gets the first reply, the second the second, a third the unscripted 500', async () => {
    server.script([answer.text('first'), fault.overloaded(), answer.text('never used')]);
    expect((await generateText({ model: p.model(), ...call })).text).toBe('first');
    const overloaded = await generateText({ model: p.model(), ...call }).catch((e: unknown) => e);
    expect((overloaded as APICallError).statusCode).toBe(p.protocol === 'anthropic' ? 529 : 503);
    server.script([]);
    const unscripted = await generateText({ model: p.model(), ...call }).catch((e: unknown) => e);
    expect([(unscripted as APICallError).statusCode, (unscripted as APICallError).responseBody]).toEqual([500, expect.stringContaining('scripted no reply')]);
    expect(server.seen).toHaveLength(3);
  });
});

describe('what only some protocols say', () => {
  const anthropic = () => createAnthropic({ baseURL: server.baseUrl, apiKey: 'sk-ant-test' }).messages('claude-sonnet-4-5');

  it('Anthropic: cache writes apart from reads, input_tokens leaving out both, as Anthropic counts', async () => {
    server.script([answer.text('ok', { usage: { input: 10_000, output: 200, cacheRead: 8_000, cacheWrite: 1_000 } })]);
    const r = await generateText({ model: anthropic(), ...call });
    expect(r.usage).toMatchObject({ inputTokens: 10_000, inputTokenDetails: { noCacheTokens: 1_000, cacheReadTokens: 8_000, cacheWriteTokens: 1_000 } });
    expect(r.usage.raw).toMatchObject({ input_tokens: 1_000, cache_read_input_tokens: 8_000, cache_creation_input_tokens: 1_000 });
  });

  it('Anthropic: tool_use blocks stream their input as input_json_delta; parallel calls each run', async () => {
    server.script([answer.toolCalls([{ name: 'spawn', input: { name: 'a', count: 1 } }, { name: 'spawn', input: { name: 'b', count: 2 } }]), answer.text('done')]);
    const executed: unknown[] = [];
    const r = streamText({
      model: anthropic(), ...call, ...quiet, stopWhen: stepCountIs(3),
      tools: { spawn: tool({ inputSchema: spawnInput, execute: async (input) => { executed.push(input); return 'ok'; } }) },
    });
    const { parts } = await drain(r.fullStream);
    expect(parts.filter((x) => x.type === 'tool-input-delta').length).toBeGreaterThan(2);
    expect(executed).toEqual([{ name: 'a', count: 1 }, { name: 'b', count: 2 }]);
    expect(await r.text).toBe('done');
  });

  it('OpenAI chat: usage comes in a last chunk only when the request sets stream_options.include_usage', async () => {
    server.script([answer.text('Herons.', { usage: { input: 30, output: 3 } }), answer.text('Herons.', { usage: { input: 30, output: 3 } })]);
    const withUsage = streamText({ model: createOpenAICompatible({ name: 'local', baseURL: server.baseUrl, includeUsage: true }).chatModel('m'), ...call });
    expect((await withUsage.usage).inputTokens).toBe(30);
    const without = streamText({ model: createOpenAICompatible({ name: 'local', baseURL: server.baseUrl }).chatModel('m'), ...call });
    expect((await without.usage).inputTokens).toBeUndefined();
    expect(server.seen.map((s) => s.body.stream_options)).toEqual([{ include_usage: true }, undefined]);
  });

  it('OpenAI Responses: a refusal content part, and its refusal deltas when streamed, read as the text', async () => {
    const refusal = "I can't help with that.";
    server.script([answer.refusal(refusal), answer.refusal(refusal)]);
    const model = createOpenAI({ baseURL: server.baseUrl, apiKey: 'sk-test' }).responses('gpt-4o');
    const r = await generateText({ model, ...call });
    expect([r.text, r.finishReason]).toEqual([refusal, 'content-filter']);
    const s = streamText({ model, ...call });
    expect([await s.text, await s.finishReason]).toEqual([refusal, 'content-filter']);
  });

  it('Google: functionCall parts carry no id; the SDK makes one and sends it back with the functionResponse', async () => {
    server.script([answer.toolCall('spawn', { name: 'x', count: 1 }), answer.text('done')]);
    const model = createGoogleGenerativeAI({ baseURL: server.googleBaseUrl, apiKey: 'g-test' }).chat('gemini-2.5-flash');
    const r = await generateText({ model, ...call, stopWhen: stepCountIs(3), tools: { spawn: tool({ inputSchema: spawnInput, execute: async () => 'ok' }) } });
    expect(r.text).toBe('done');
    expect(server.seen.map((s) => s.path)).toEqual(['/v1beta/models/gemini-2.5-flash:generateContent', '/v1beta/models/gemini-2.5-flash:generateContent']);
    expect(server.seen[0]!.model).toBe('gemini-2.5-flash');
  });

  it('a stalled stream keeps what it sent and stays open until the client gives up', async () => {
    server.script([fault.stall(answer.text('Herons wade in shallow water.'), 3)]);
    const abort = new AbortController();
    const r = streamText({ model: createOpenAI({ baseURL: server.baseUrl, apiKey: 'sk-test' }).chat('gpt-4o'), ...call, ...quiet, abortSignal: abort.signal });
    const got: string[] = [];
    for await (const t of r.textStream) {
      got.push(t);
      if (got.length === 2) abort.abort();
    }
    expect(got).toEqual(['Herons', ' wade in']);
  });

  it('a reply written by hand (raw.json), and an unknown path answered 404', async () => {
    server.script([raw.json(418, { error: { message: 'teapot' } })]);
    const err = await generateText({ model: createOpenAI({ baseURL: server.baseUrl, apiKey: 'k' }).chat('gpt-4o'), ...call }).catch((e: unknown) => e);
    expect([(err as APICallError).statusCode, (err as APICallError).message]).toEqual([418, 'teapot']);
    server.script([answer.text('unused')]);
    const res = await fetch(`${server.origin}/nowhere`, { method: 'POST', body: '{}' });
    expect([res.status, server.seen.at(-1)!.protocol]).toEqual([404, undefined]);
  });
});
