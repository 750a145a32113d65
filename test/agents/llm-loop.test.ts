import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { pino } from 'pino';
import { testDatabase } from '../helpers/db.js';
import { envKept } from '../helpers/env.js';
import { dagCreate, databaseReset, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { answer, fault, llmServerStart, type SeenRequest } from '../helpers/llm-server/index.js';
import { AgentRunner } from '../../src/runtime/agent-runner.js';
import { defineAgent, type AgentDefinition } from '../../src/runtime/define-agent.js';
import llm from '../../agents/llm.js';
import { LLM_PROVIDERS } from '../../agents/llm-providers.js';
import { dagFileLoad } from '../../src/dag/load.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { dagRerunChanged } from '../../src/engine/dag/rerun-changed.js';
import { dagCompare } from '../../src/engine/read/compare.js';

// The llm agent's tool loop, structured output and context-window fallback, against a local Anthropic Messages
// (and OpenAI chat-completions) stand-in, streamed as the agent always asks.
const database = await testDatabase();
const { db } = database;
const silent = pino({ level: 'silent' });
const provider = await llmServerStart();
const runners: AgentRunner[] = [];

async function run(agent: AgentDefinition, id = agent.name): Promise<void> {
  const r = new AgentRunner(agent, { database, log: silent, id });
  runners.push(r);
  await r.start();
}

const ENV_KEYS = ['DAGENT_LLM_PRICES', 'DAGENT_LLM_MAX_OUTPUT_TOKENS', 'DAGENT_LLM_IDLE_TIMEOUT_SEC', 'DAGENT_LLM_MODEL', ...LLM_PROVIDERS.flatMap((p) => [...p.keyEnv, ...p.baseUrlEnv])];
const env = envKept(ENV_KEYS);

beforeEach(async () => {
  await databaseReset(db);
  provider.seen = [];
  provider.script([]);
  env.clear();
  process.env.ANTHROPIC_API_KEY = 'sk-ant-test';
  process.env.DAGENT_LLM_ANTHROPIC_BASE_URL = provider.baseUrl;
  process.env.DAGENT_LLM_BASE_URL = provider.baseUrl;
  process.env.DAGENT_LLM_API_KEY = 'sk-test';
  process.env.DAGENT_LLM_PRICES = JSON.stringify({ 'anthropic/claude-test': { input: 3, output: 15 }, 'anthropic/claude-big': { input: 6, output: 30 } });
});
afterEach(async () => {
  await Promise.all(runners.splice(0).map((r) => r.stop({ graceMs: 0 })));
});
afterAll(async () => {
  await provider.close();
});

const tasksOf = (dagId: string) => rowsOf<{ key: string; status: string; output: unknown }>(db, sql`select key, status, output from tasks where dag_id = ${dagId} order by key`);
const attemptsOf = (dagId: string) => rowsOf<{ key: string; attempt: number; outcome: string; error_class: string | null; error_message: string | null; model: string | null; cost_usd: number }>(db, sql`
  select t.key, a.attempt, a.outcome, a.error_class, a.error_message, a.model, a.cost_usd::float8 from attempts a join tasks t on t.id = a.task_id where a.dag_id = ${dagId} order by t.key, a.attempt`);
/** The tool results a request carries back to the model (Anthropic: user messages' tool_result blocks). */
const toolResults = (r: SeenRequest) => JSON.stringify((r.body.messages as Array<{ content: unknown }>).map((m) => m.content))
  .match(/"type":"tool_result"/g)?.length ?? 0;

describe('the llm agent\'s tool loop', () => {
  it('spawns a subtask and waits: the attempt ends, the child runs, the task resumes replaying its first call and answers with the child\'s output', async () => {
    provider.script([
      answer.toolCall('search', { key: 'pg', input: { query: 'postgres queues' } }, { usage: { input: 200, output: 30 } }),
      answer.text('PostgreSQL queues: graphile-worker and pg-boss (from the search).', { usage: { input: 300, output: 40 } }),
    ]);
    const searched: unknown[] = [];
    await run(defineAgent({
      name: 'search', capabilities: ['search'],
      async run(task) {
        searched.push(task.spec.input);
        // Done once the research task waits for it (the next test has it done before the wait).
        await eventually('the research attempt waiting', async () => (await attemptsOf(task.dagId)).some((a) => a.key === 'research' && a.outcome === 'waiting'));
        return { found: ['graphile-worker', 'pg-boss'] };
      },
    }));
    await run(llm, 'llm-1');
    const dagId = await dagCreate(db, `
name: research
spawn:
  max_tasks: 4
  templates:
    search: { type: search, spec: { constraints: { capabilities: [search] } }, accepts: [query] }
tasks:
  research:
    type: llm
    spec:
      constraints: { capabilities: [llm] }
      models: [anthropic/claude-test]
      prompt: Which job queues run on PostgreSQL?
      input:
        tools:
          - read_input
          - { name: search, description: 'Search one question', spawn: { template: search, wait: true } }
`);
    await eventually('research completed', async () => (await taskStatusByKey(db, dagId)).research === 'completed', 20_000);
    const tasks = await tasksOf(dagId);
    expect(tasks.map((t) => [t.key, t.status])).toEqual([['research', 'completed'], ['research/pg', 'completed']]);
    expect(tasks[0]!.output).toMatchObject({ type: 'text', model: 'anthropic/claude-test', text: 'PostgreSQL queues: graphile-worker and pg-boss (from the search).' });
    expect(searched).toEqual([{ query: 'postgres queues' }]);
    // Two requests in all: the first call was replayed when the task resumed, not sent again; the second carries the child's output.
    expect(provider.seen).toHaveLength(2);
    expect(provider.seen[0]!.body.tools).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'search' }), expect.objectContaining({ name: 'read_input' })]));
    expect(toolResults(provider.seen[1]!)).toBe(1);
    expect(JSON.stringify(provider.seen[1]!.body.messages)).toContain('graphile-worker');
    const attempts = (await attemptsOf(dagId)).filter((a) => a.key === 'research');
    expect(attempts.map((a) => a.outcome)).toEqual(['waiting', 'completed']);
    // Charged once per call: 200 in + 30 out, then 300 + 40, at $3 and $15 per million.
    expect(attempts.reduce((n, a) => n + a.cost_usd, 0)).toBeCloseTo((500 * 3 + 70 * 15) / 1e6, 9);
  });

  it('a runaway tool loop is stopped by the task\'s max_cost_usd before the call that would pass it', async () => {
    // Every answer calls the log tool again; each call costs $0.00165 (100 in, 90 out) and is estimated at its prompt plus 100 out.
    process.env.DAGENT_LLM_MAX_OUTPUT_TOKENS = '100';
    provider.reply = () => answer.toolCall('log', { message: 'still thinking' }, { usage: { input: 100, output: 90 } });
    await run(llm, 'llm-runaway');
    const dagId = await dagCreate(db, `
name: runaway
tasks:
  loop:
    type: llm
    max_attempts: 1
    spec:
      constraints: { capabilities: [llm], max_cost_usd: 0.006 }
      models: [anthropic/claude-test]
      prompt: Think forever.
      input: { tools: [log], max_steps: 50 }
`);
    await eventually('dead-lettered', async () => (await taskStatusByKey(db, dagId)).loop === 'dead_lettered', 20_000);
    const [a] = await attemptsOf(dagId);
    expect(a!.error_class).toBe('budget_exceeded');
    // Three calls fit ($0.00495); a fourth would not, and was never sent.
    expect(provider.seen).toHaveLength(3);
    expect(a!.cost_usd).toBeCloseTo(3 * (100 * 3 + 90 * 15) / 1e6, 9);
    expect(a!.cost_usd).toBeLessThanOrEqual(0.006);
  });

  it('each of dagent\'s tools: read_input reads an upstream output, log writes the attempt\'s log, a spawn the DAG\'s policy refuses is an error the model sees, wait_subtasks waits for a subtask spawned earlier', async () => {
    provider.script([
      answer.toolCall('read_input', { name: 'facts' }),
      answer.toolCall('log', { message: 'read the facts; asking a search' }),
      answer.toolCall('spawn_subtasks', { subtasks: [{ key: 'mine', prompt: 'anything I like' }] }),
      answer.toolCall('spawn_subtasks', { subtasks: [{ key: 'pg', template: 'search', input: { query: 'postgres queues' } }] }),
      answer.toolCall('wait_subtasks', {}),
      answer.text('Done: graphile-worker.'),
    ]);
    await run(defineAgent({ name: 'facts', capabilities: ['facts'], async run() { return { fact: 'PostgreSQL 17 has SKIP LOCKED' }; } }));
    await run(defineAgent({
      name: 'search', capabilities: ['search'],
      async run(task) {
        await eventually('the research attempt waiting', async () => (await attemptsOf(task.dagId)).some((a) => a.key === 'research' && a.outcome === 'waiting'));
        return { found: ['graphile-worker'] };
      },
    }));
    await run(llm, 'llm-tools');
    const dagId = await dagCreate(db, `
name: tools
spawn:
  free_form: false
  templates:
    search: { type: search, spec: { constraints: { capabilities: [search] } }, accepts: [query] }
tasks:
  facts: { type: facts, spec: { constraints: { capabilities: [facts] } } }
  research:
    type: llm
    depends_on: [facts]
    spec:
      constraints: { capabilities: [llm] }
      models: [anthropic/claude-test]
      context: [facts]
      prompt: Use the tools.
      input: { tools: [read_input, log, spawn_subtasks, wait_subtasks] }
`);
    await eventually('research completed', async () => (await taskStatusByKey(db, dagId)).research === 'completed', 20_000);
    expect((await tasksOf(dagId)).map((t) => [t.key, t.status])).toEqual([['facts', 'completed'], ['research', 'completed'], ['research/pg', 'completed']]);
    // Five calls in the first attempt, replayed by the second (not sent again), which then makes the sixth.
    expect(provider.seen).toHaveLength(6);
    const body = (i: number) => JSON.stringify(provider.seen[i]!.body.messages);
    expect(body(1)).toContain('PostgreSQL 17 has SKIP LOCKED');
    expect(body(3)).toMatch(/free.form|templates only|template/i);
    expect(body(3)).toContain('"is_error":true');
    expect(body(5)).toContain('graphile-worker');
    const logged = await rowsOf<{ message: string }>(db, sql`select l.message from attempt_logs l join tasks t on t.id = l.task_id where t.dag_id = ${dagId} and t.key = 'research'`);
    expect(logged.map((l) => l.message)).toContain('read the facts; asking a search');
    expect((await attemptsOf(dagId)).filter((a) => a.key === 'research').map((a) => a.outcome)).toEqual(['waiting', 'completed']);
  });

  it('a model whose stream goes silent for DAGENT_LLM_IDLE_TIMEOUT_SEC is abandoned as provider_unreachable, and the retry answers', async () => {
    process.env.DAGENT_LLM_IDLE_TIMEOUT_SEC = '1';
    provider.script([fault.stall(answer.text('Half an answer and then nothing'), 2), answer.text('A whole answer.')]);
    await run(llm, 'llm-idle');
    const dagId = await dagCreate(db, `
name: idle
tasks:
  t: { type: llm, max_attempts: 2, retry: { strategy: immediate }, spec: { constraints: { capabilities: [llm] }, models: [anthropic/claude-test], prompt: hi } }
`);
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).t === 'completed', 20_000);
    expect((await attemptsOf(dagId)).map((a) => [a.outcome, a.error_class])).toEqual([['failed', 'provider_unreachable'], ['completed', null]]);
    expect((await tasksOf(dagId))[0]!.output).toMatchObject({ text: 'A whole answer.' });
  });

  it('refuses a task whose tools do not read, naming the entry, without a request', async () => {
    await run(llm, 'llm-bad-tools');
    const dagId = await dagCreate(db, `
name: bad-tools
tasks:
  t: { type: llm, spec: { constraints: { capabilities: [llm] }, models: [anthropic/claude-test], prompt: hi, input: { tools: [read_input, { name: search, description: x, spawn: { template: 7 } }] } } }
`);
    await eventually('dead-lettered', async () => (await taskStatusByKey(db, dagId)).t === 'dead_lettered');
    const [a] = await attemptsOf(dagId);
    expect([a!.error_class, a!.error_message]).toEqual(['bad_request', expect.stringMatching(/^spec\.input\.tools\[1\]/)]);
    expect(provider.seen).toEqual([]);
  });
});

describe('structured output', () => {
  const SCHEMA_DAG = (attempts: number) => `
name: structured
defaults: { retry: { strategy: immediate } }
tasks:
  pick:
    type: llm
    max_attempts: ${attempts}
    spec: { constraints: { capabilities: [llm] }, models: [anthropic/claude-test], prompt: Name two queues. }
    output:
      type: json
      validation: { kind: json-schema, schema: { type: object, required: [queues], properties: { queues: { type: array, items: { type: string }, minItems: 2 } }, additionalProperties: false } }
`;

  it('asks for an object of the output\'s JSON Schema and the object is the output', async () => {
    provider.script([answer.text('{"queues":["graphile-worker","pg-boss"]}')]);
    await run(llm, 'llm-structured');
    const dagId = await dagCreate(db, SCHEMA_DAG(1));
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).pick === 'completed');
    expect((await tasksOf(dagId))[0]!.output).toEqual({ queues: ['graphile-worker', 'pg-boss'] });
    // The schema went to the provider (Anthropic's native structured output).
    expect(JSON.stringify(provider.seen[0]!.body)).toContain('"queues"');
  });

  it('an OpenAI-compatible endpoint (vLLM, Ollama, LiteLLM) is sent the schema as response_format json_schema', async () => {
    provider.script([answer.text('{"queues":["graphile-worker","pg-boss"]}')]);
    await run(llm, 'llm-structured-compatible');
    const dagId = await dagCreate(db, SCHEMA_DAG(1).replace('models: [anthropic/claude-test]', 'models: [qwen-test]'));
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).pick === 'completed');
    expect((await tasksOf(dagId))[0]!.output).toEqual({ queues: ['graphile-worker', 'pg-boss'] });
    expect(provider.seen[0]!.path).toContain('/chat/completions');
    const format = provider.seen[0]!.body.response_format as { type: string; json_schema: { schema: { required: string[] } } };
    expect([format.type, format.json_schema.schema.required]).toEqual(['json_schema', ['queues']]);
  });

  it('an answer that is not JSON of the schema fails invalid_output; the retry names the mistake and makes a new call', async () => {
    provider.script([answer.text('Sure! graphile-worker and pg-boss.'), answer.text('{"queues":["graphile-worker","pg-boss"]}')]);
    await run(llm, 'llm-structured-retry');
    const dagId = await dagCreate(db, SCHEMA_DAG(2));
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).pick === 'completed', 20_000);
    expect((await attemptsOf(dagId)).map((a) => [a.outcome, a.error_class])).toEqual([['failed', 'invalid_output'], ['completed', null]]);
    expect(provider.seen).toHaveLength(2);
    expect(JSON.stringify(provider.seen[1]!.body.messages)).toContain('Earlier attempts at this task failed');
  });
});

describe('provider errors', () => {
  it('a refused key is auth_failure, dead-lettered at once, and the message never shows the key even when the provider quotes it', async () => {
    provider.script([fault.unauthorized({ message: 'invalid x-api-key: sk-ant-test' })]);
    await run(llm, 'llm-bad-key');
    const dagId = await dagCreate(db, `
name: bad-key
tasks:
  t: { type: llm, max_attempts: 3, spec: { constraints: { capabilities: [llm] }, models: [anthropic/claude-test], prompt: hi } }
`);
    await eventually('dead-lettered', async () => (await taskStatusByKey(db, dagId)).t === 'dead_lettered');
    const attempts = await attemptsOf(dagId);
    expect(attempts.map((a) => a.error_class)).toEqual(['auth_failure']);
    expect(attempts[0]!.error_message).toContain('invalid x-api-key: [key]');
    // Nor does the attempt's log, where the failed step's error is written (it is there, without the key).
    const logged = await rowsOf<{ message: string; fields: string }>(db, sql`
      select l.message, coalesce(l.fields::text, '') as fields from attempt_logs l join tasks t on t.id = l.task_id where t.dag_id = ${dagId}`);
    expect(logged.some((l) => l.fields.includes('invalid x-api-key'))).toBe(true);
    expect(logged.filter((l) => `${l.message} ${l.fields}`.includes('sk-ant-test'))).toEqual([]);
  });
});

describe('the context window', () => {
  it('a prompt too long for the first model is tried at once on the task\'s fallback with a larger window', async () => {
    provider.script([fault.contextTooLong(), answer.text('fits here', { usage: { input: 5000, output: 10 } })]);
    await run(llm, 'llm-window');
    const dagId = await dagCreate(db, `
name: window
tasks:
  long: { type: llm, max_attempts: 1, spec: { constraints: { capabilities: [llm] }, models: [anthropic/claude-test], fallback_models: [anthropic/claude-big], prompt: a long prompt } }
`);
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).long === 'completed');
    expect(provider.seen.map((s) => s.model)).toEqual(['claude-test', 'claude-big']);
    const [a] = await attemptsOf(dagId);
    expect([a!.outcome, a!.model]).toEqual(['completed', 'anthropic/claude-big']);
    expect((await tasksOf(dagId))[0]!.output).toMatchObject({ model: 'anthropic/claude-big', text: 'fits here' });
  });

  it('with no model left, the attempt fails context_length with the provider\'s words', async () => {
    provider.script([fault.contextTooLong()]);
    await run(llm, 'llm-window-none');
    const dagId = await dagCreate(db, `
name: window-none
tasks:
  long: { type: llm, max_attempts: 1, spec: { constraints: { capabilities: [llm] }, models: [anthropic/claude-test], prompt: a long prompt } }
`);
    await eventually('dead-lettered', async () => (await taskStatusByKey(db, dagId)).long === 'dead_lettered');
    const [a] = await attemptsOf(dagId);
    expect(a!.error_class).toBe('context_length');
    expect(a!.error_message).toMatch(/^model call failed: HTTP 400: .*prompt is too long/);
    expect(a!.error_message).not.toContain('sk-ant-test');
  });
});

describe('rerun with another model, then compare', () => {
  it('dag rerun --model runs the llm task again on OpenAI, the upstream task carried over, and compare sets the two answers, models and costs side by side', async () => {
    process.env.OPENAI_API_KEY = 'sk-openai-test';
    process.env.DAGENT_LLM_OPENAI_BASE_URL = provider.baseUrl;
    process.env.DAGENT_LLM_PRICES = JSON.stringify({ 'anthropic/claude-test': { input: 3, output: 15 }, 'openai/gpt-test': { input: 1, output: 2 } });
    provider.script([
      answer.text('Claude says: graphile-worker.', { usage: { input: 100, output: 10 } }),
      answer.text('GPT says: pg-boss.', { usage: { input: 100, output: 20 } }),
    ]);
    let factsRuns = 0;
    await run(defineAgent({ name: 'facts', capabilities: ['facts'], async run() { factsRuns++; return { fact: 'SKIP LOCKED' }; } }));
    await run(llm, 'llm-rerun');
    const dagId = await dagCreate(db, `
name: ask
tasks:
  facts: { type: facts, spec: { constraints: { capabilities: [facts] } } }
  answer: { type: llm, depends_on: [facts], spec: { constraints: { capabilities: [llm] }, models: [anthropic/claude-test], context: [facts], prompt: Name a queue. } }
`);
    await eventually('first run completed', async () => (await taskStatusByKey(db, dagId)).answer === 'completed', 20_000);
    const rerun = await dagRerunChanged(db, dagId, { model: 'openai/gpt-test' });
    expect([rerun.rerun, rerun.reused]).toEqual([['answer'], ['facts']]);
    await eventually('rerun completed', async () => (await taskStatusByKey(db, rerun.dagId)).answer === 'completed', 20_000);
    expect(factsRuns).toBe(1);
    // The second request went to OpenAI's Responses API with the same prompt and the carried-over upstream output.
    expect(provider.seen.map((r) => r.path)).toEqual([expect.stringContaining('/messages'), expect.stringContaining('/responses')]);
    expect(JSON.stringify(provider.seen[1]!.body)).toContain('SKIP LOCKED');
    const c = await dagCompare(db, dagId, rerun.dagId);
    const row = c.tasks.find((t) => t.key === 'answer')!;
    expect([row.a!.model, row.b!.model]).toEqual(['anthropic/claude-test', 'openai/gpt-test']);
    expect(row.a!.outputText).toContain('Claude says: graphile-worker.');
    expect(row.b!.outputText).toContain('GPT says: pg-boss.');
    expect(row.a!.costUsd).toBeCloseTo((100 * 3 + 10 * 15) / 1e6, 9);
    expect(row.b!.costUsd).toBeCloseTo((100 * 1 + 20 * 2) / 1e6, 9);
    expect(c.tasks.find((t) => t.key === 'facts')!.b!.reusedFrom).not.toBeNull();
    expect(c.outputsDiffering).toBe(1);
  });
});

describe('dags/examples/research-two-providers.yaml', () => {
  it('answers on Anthropic and OpenAI (Responses API) and compares on Google with a JSON verdict of the output\'s schema', async () => {
    Object.assign(process.env, {
      OPENAI_API_KEY: 'sk-openai-test', DAGENT_LLM_OPENAI_BASE_URL: provider.baseUrl,
      GOOGLE_GENERATIVE_AI_API_KEY: 'google-test', DAGENT_LLM_GOOGLE_BASE_URL: provider.googleBaseUrl,
      DAGENT_LLM_PRICES: JSON.stringify({ 'anthropic/claude-sonnet-4-5': { input: 3, output: 15 }, 'openai/gpt-4.1': { input: 2, output: 8 }, 'google/gemini-2.5-flash': { input: 0.3, output: 2.5 } }),
    });
    provider.reply = (req) => (req.protocol === 'google'
      ? answer.text('{"better":"claude","disagreements":["whether pg-boss uses SKIP LOCKED"],"summary":"Both name graphile-worker and pg-boss."}')
      : answer.text(req.protocol === 'anthropic' ? 'graphile-worker and pg-boss, both with SKIP LOCKED.' : 'pg-boss and graphile-worker.'));
    await run(llm, 'llm-example');
    const [submitted] = await dagSubmit(db, [await dagFileLoad('dags/examples/research-two-providers.yaml')]);
    await eventually('compare completed', async () => (await taskStatusByKey(db, submitted!.dagId)).compare === 'completed', 20_000);
    const tasks = Object.fromEntries((await tasksOf(submitted!.dagId)).map((t) => [t.key, t.output]));
    expect(tasks.claude).toMatchObject({ model: 'anthropic/claude-sonnet-4-5', text: 'graphile-worker and pg-boss, both with SKIP LOCKED.' });
    expect(tasks.gpt).toMatchObject({ model: 'openai/gpt-4.1', text: 'pg-boss and graphile-worker.' });
    expect(tasks.compare).toEqual({ better: 'claude', disagreements: ['whether pg-boss uses SKIP LOCKED'], summary: 'Both name graphile-worker and pg-boss.' });
    expect(provider.seen.map((r) => r.protocol).sort()).toEqual(['anthropic', 'google', 'openai-responses']);
    // The comparison was asked with both answers and for the verdict's schema.
    const google = provider.seen.find((r) => r.protocol === 'google')!;
    expect(JSON.stringify(google.body)).toContain('graphile-worker and pg-boss, both with SKIP LOCKED.');
    expect(JSON.stringify(google.body)).toContain('disagreements');
  });
});

describe('agents/research.ts (the AI SDK agent in docs/agents.md)', () => {
  it('splits its question into a subtask it waits for, resumes replaying its first call, and answers', async () => {
    provider.script([
      answer.toolCall('spawn_subtasks', { subtasks: [{ key: 'history', prompt: 'When did SKIP LOCKED arrive?' }], wait: true }, { usage: { input: 100, output: 20 } }),
      answer.text('In PostgreSQL 9.5 (2016).', { usage: { input: 50, output: 10 } }),
      answer.text('Queues claim with SKIP LOCKED, which PostgreSQL 9.5 added.', { usage: { input: 180, output: 30 } }),
    ]);
    process.env.DAGENT_LLM_PRICES = JSON.stringify({ 'anthropic/claude-sonnet-4-5': { input: 3, output: 15 } });
    // The module reads its base URL when it loads: after the environment is set.
    const research = (await import('../../agents/research.js')).default;
    await run(research, 'research-1');
    const dagId = await dagCreate(db, `
name: research-agent
tasks:
  q: { type: research, spec: { constraints: { capabilities: [research] }, prompt: How do PostgreSQL queues claim work? } }
`);
    await eventually('q completed', async () => (await taskStatusByKey(db, dagId)).q === 'completed', 20_000);
    const tasks = Object.fromEntries((await tasksOf(dagId)).map((t) => [t.key, t.output]));
    expect(tasks.q).toEqual({ text: 'Queues claim with SKIP LOCKED, which PostgreSQL 9.5 added.', model: 'anthropic/claude-sonnet-4-5' });
    expect(tasks['q/history']).toEqual({ text: 'In PostgreSQL 9.5 (2016).', model: 'anthropic/claude-sonnet-4-5' });
    // Three requests: the parent's first call was replayed on resuming; its second carries the subtask's answer.
    expect(provider.seen).toHaveLength(3);
    expect(JSON.stringify(provider.seen[2]!.body.messages)).toContain('In PostgreSQL 9.5 (2016).');
    expect((await attemptsOf(dagId)).filter((a) => a.key === 'q').map((a) => a.outcome)).toEqual(['waiting', 'completed']);
  });
});
