import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { context, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';
import { leash } from '../helpers/child-leash.js';
import { otlpReceiverStart } from '../helpers/otlp-receiver.js';
import { CLI_COMPILED } from '../helpers/cli.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import validateTest from '../../agents/validate-test.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { attemptsEndedEmit, engineEvents } from '../../src/observability/engine-events.js';
import { attemptSpanId, attemptTraceparent, dagentIdGenerator, dagSpanId, dagTraceId } from '../../src/observability/trace-ids.js';
import { traceEmitterStart, type TraceEmitter } from '../../src/observability/tracing.js';
import { tracingWanted } from '../../src/observability/tracing-env.js';

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const { run } = agentRunners(database);

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ idGenerator: dagentIdGenerator, spanProcessors: [new SimpleSpanProcessor(exporter)] });
let emitter: TraceEmitter;
beforeAll(() => {
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  emitter = traceEmitterStart(db, { flushIntervalMs: 50 });
});
afterAll(async () => {
  await emitter.stop();
  trace.disable();
  context.disable();
});

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const time = (t: [number, number]) => t[0] * 1000 + Math.round(t[1] / 1e6);

describe('OpenTelemetry traces', () => {
  it('a DAG is one trace: its span, an attempt span per attempt under it, validation steps and the agent\'s own spans under their attempt', async () => {
    let tries = 0;
    await run(defineAgent({
      name: 'traced', capabilities: [],
      async run(task, ctx) {
        // The handler runs in its attempt's context: a span it starts nests under the attempt.
        await trace.getTracer('the-agent').startActiveSpan('call the model', async (span) => {
          span.setAttribute('traceparent.seen', ctx.traceparent);
          span.end();
        });
        if (task.key === 'flaky' && tries++ === 0) throw new Error('the provider hung up');
        ctx.reportCost({ usd: 0.25, tokens: { input: 120, output: 30 }, model: 'gpt-test' });
        return task.key === 'notes' ? { text: '# Release' } : { ok: true };
      },
    }), { id: 'traced-1' });
    const dagId = await dagCreate(db, `
name: traced
tasks:
  flaky: { type: t, retry: { strategy: immediate } }
  notes:
    type: t
    depends_on: [flaky]
    output:
      validation:
        - { kind: json-schema, schema: { type: object, required: [text] } }
        - { kind: regex, field: text, pattern: "^# Release" }
`);
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    const attempts = await rowsOf<{ task_id: string; fence: number; outcome: string; key: string; started_at: string; ended_at: string }>(db, sql`
      select a.task_id, a.fence, a.outcome, t.key, a.started_at::text, a.ended_at::text from attempts a join tasks t on t.id = a.task_id
      where a.dag_id = ${dagId} order by a.started_at`);
    expect(attempts.map((a) => [a.key, a.outcome])).toEqual([['flaky', 'failed'], ['flaky', 'completed'], ['notes', 'completed']]);

    const traceId = dagTraceId(dagId);
    await eventually('the DAG span emitted', async () => {
      await emitter.flush();
      return exporter.getFinishedSpans().some((s) => s.name === 'dag traced');
    });
    const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    expect(byId.size, 'no span twice').toBe(spans.length);

    const dag = byId.get(dagSpanId(dagId))!;
    expect([dag.name, parentOf(dag), dag.attributes['dagent.dag.status'], dag.attributes['dagent.cost_usd']]).toEqual(['dag traced', undefined, 'completed', 0.5]);

    for (const a of attempts) {
      const span = byId.get(attemptSpanId(a.task_id, a.fence));
      expect(span, `${a.key} fence ${a.fence}`).toBeDefined();
      expect([span!.name, parentOf(span!), span!.attributes['dagent.agent.id'], span!.attributes['dagent.outcome']]).toEqual([`task ${a.key}`, dagSpanId(dagId), 'traced-1', a.outcome]);
      expect([time(span!.startTime), time(span!.endTime)]).toEqual([Date.parse(a.started_at), Date.parse(a.ended_at)]);
      // The agent's own span, under its attempt's, and the traceparent it was given names that attempt.
      const own = spans.find((s) => s.name === 'call the model' && parentOf(s) === attemptSpanId(a.task_id, a.fence));
      expect(own?.attributes['traceparent.seen']).toBe(attemptTraceparent(dagId, a.task_id, a.fence));
    }
    const [failed, retried] = [byId.get(attemptSpanId(attempts[0]!.task_id, attempts[0]!.fence))!, byId.get(attemptSpanId(attempts[1]!.task_id, attempts[1]!.fence))!];
    expect([failed.status.code, failed.attributes['error.type']]).toEqual([SpanStatusCode.ERROR, 'error']);
    expect([retried.status.code, retried.attributes['gen_ai.request.model'], retried.attributes['gen_ai.usage.input_tokens'], retried.attributes['dagent.cost_usd']])
      .toEqual([SpanStatusCode.UNSET, 'gpt-test', 120, 0.25]);

    const notes = attempts[2]!;
    const steps = spans.filter((s) => s.name.startsWith('validate ')).map((s) => [s.name, parentOf(s), s.attributes['dagent.validation.pass']]);
    expect(steps).toEqual([
      ['validate json-schema', attemptSpanId(notes.task_id, notes.fence), true],
      ['validate regex', attemptSpanId(notes.task_id, notes.fence), true],
    ]);
    // Three attempts, their three own spans, two steps and the DAG: nothing else in the trace.
    expect(spans).toHaveLength(9);
  });

  it('a durable step is a span under the attempt that ran it, and a replayed one an instant under the attempt that replayed it', async () => {
    await run(defineAgent({
      name: 'stepped', capabilities: ['stepped'],
      async run(task, ctx) {
        const a = await ctx.step('search', () => {
          ctx.reportCost({ usd: 0.5, tokens: { input: 200, output: 20 }, model: 'gpt-test' });
          return 'found';
        });
        if (task.attempt === 1) throw new Error('crash after the search');
        return { a, b: await ctx.step('write', () => 'written') };
      },
    }), { id: 'stepped-1' });
    const dagId = await dagCreate(db, 'name: stepped\ntasks:\n  t: { type: t, retry: { strategy: immediate }, spec: { constraints: { capabilities: [stepped] } } }\n');
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    const [first, second] = await rowsOf<{ task_id: string; fence: number }>(db, sql`select task_id, fence from attempts where dag_id = ${dagId} order by fence`);
    await eventually('the DAG span emitted', async () => {
      await emitter.flush();
      return exporter.getFinishedSpans().some((s) => s.name === 'dag stepped');
    });
    const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === dagTraceId(dagId) && s.name.startsWith('step '));
    const view = (s: ReadableSpan) => [s.name, parentOf(s), s.attributes['dagent.step.replayed'], s.attributes['dagent.cost_usd'], s.attributes['dagent.step.replayed_cost_usd'] ?? null];
    expect(spans.map(view).sort()).toEqual([
      ['step search', attemptSpanId(first!.task_id, first!.fence), false, 0.5, null],
      ['step search (replayed)', attemptSpanId(second!.task_id, second!.fence), true, 0, 0.5],
      ['step write', attemptSpanId(second!.task_id, second!.fence), false, 0, null],
    ].sort());
    const ran = spans.find((s) => s.name === 'step search')!;
    expect([ran.attributes['gen_ai.usage.input_tokens'], ran.attributes['gen_ai.request.model']]).toEqual([200, 'gpt-test']);
    expect(time(ran.endTime)).toBeGreaterThanOrEqual(time(ran.startTime));
  });

  it('a step run by a validation agent is that agent\'s attempt span, named for the step, under the attempt it judged', async () => {
    await run(defineAgent({ name: 'drafter', capabilities: ['write'], run: async () => ({ text: 'draft' }) }), { id: 'drafter-1' });
    await run(validateTest, { id: 'checker-1' });
    const dagId = await dagCreate(db, `
name: judged
tasks:
  draft:
    type: t
    spec: { constraints: { capabilities: [write] } }
    output:
      validation:
        - { kind: regex, field: text, pattern: "^draft$" }
        - { kind: test, command: "true" }
`);
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    const [draft, check] = await rowsOf<{ task_id: string; fence: number; key: string }>(db, sql`
      select a.task_id, a.fence, t.key from attempts a join tasks t on t.id = a.task_id where a.dag_id = ${dagId} order by t.validates_id nulls first`);
    expect([draft!.key, check!.key]).toEqual(['draft', `draft/validate-2@${draft!.fence}`]);
    await eventually('the DAG span emitted', async () => {
      await emitter.flush();
      return exporter.getFinishedSpans().some((s) => s.name === 'dag judged');
    });
    const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === dagTraceId(dagId));
    const judged = spans.find((s) => s.spanContext().spanId === attemptSpanId(check!.task_id, check!.fence))!;
    expect([judged.name, parentOf(judged), judged.attributes['dagent.agent.id'], judged.attributes['dagent.validates.task_id'], judged.attributes['dagent.outcome']])
      .toEqual(['validate validate:test', attemptSpanId(draft!.task_id, draft!.fence), 'checker-1', draft!.task_id, 'completed']);
    // The inline step before it has its own span under the same attempt; the delegated one has no second span.
    expect(spans.filter((s) => s.name.startsWith('validate ')).map((s) => [s.name, parentOf(s)]).sort()).toEqual([
      ['validate regex', attemptSpanId(draft!.task_id, draft!.fence)],
      ['validate validate:test', attemptSpanId(draft!.task_id, draft!.fence)],
    ]);
  });

  it('the ids are prefixes of the SHA-256 of their names, so every process derives the same ones (a trace id it remembers too)', () => {
    const sha = (s: string, n: number) => createHash('sha256').update(s).digest('hex').slice(0, n);
    for (const dagId of ['dag_a', 'dag_b', 'dag_a']) {
      expect(dagTraceId(dagId)).toBe(sha(`dagent:trace:${dagId}`, 32));
      expect(dagSpanId(dagId)).toBe(sha(`dagent:dag:${dagId}`, 16));
    }
    expect(attemptSpanId('tsk_1', 3)).toBe(sha('dagent:attempt:tsk_1:3', 16));
    expect(attemptTraceparent('dag_a', 'tsk_1', 3)).toBe(`00-${sha('dagent:trace:dag_a', 32)}-${sha('dagent:attempt:tsk_1:3', 16)}-01`);
  });

  it('with no one listening (tracing off), the engine does not even build the list of what ended', () => {
    const listeners = engineEvents.listeners('attemptsEnded');
    engineEvents.removeAllListeners('attemptsEnded');
    let built = 0;
    try {
      attemptsEndedEmit(() => { built++; return [{ taskId: 't', fence: 1 }]; });
      expect(built).toBe(0);
    } finally {
      for (const l of listeners) engineEvents.on('attemptsEnded', l as never);
    }
    attemptsEndedEmit(() => { built++; return []; });
    expect(built).toBe(1);
  });

  it('is on only when the OTEL_* variables ask for it: an exporter or an endpoint, never with the SDK disabled or exporter none', () => {
    expect(tracingWanted({})).toBeNull();
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe('otlp');
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe('otlp');
    expect(tracingWanted({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe('otlp');
    expect(tracingWanted({ OTEL_TRACES_EXPORTER: 'console' })).toBe('console');
    expect(tracingWanted({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBeNull();
    expect(tracingWanted({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' })).toBeNull();
  });
});

describe('the trace context over HTTP', () => {
  it('a claim gives each task its attempt\'s traceparent, and one task also as the traceparent header', async () => {
    const dagId = await dagCreate(db, 'name: over-http\ntasks:\n  one: { type: t }\n');
    const token = await http.agentToken('http-tracer');
    const reg = await http.call('POST', '/api/agents', { token, body: { id: 'http-tracer', type: 'py', capabilities: [] } });
    expect(reg.status).toBe(201);
    const r = await http.call('POST', '/api/agents/http-tracer/claim', { token, body: { limit: 1, dag_id: dagId } });
    expect(r.status).toBe(200);
    const [t] = r.body.tasks;
    expect(t.traceparent).toBe(attemptTraceparent(dagId, t.id, t.fence));
    expect(r.headers.get('traceparent')).toBe(t.traceparent);
  });
});

describe('exporting over OTLP from a dagent process', () => {
  it('dagent agent run with OTEL_EXPORTER_OTLP_ENDPOINT sends its spans to the collector', async () => {
    const collector = await otlpReceiverStart();
    const dagId = await dagCreate(db, 'name: exported\ntasks:\n  one: { type: t }\n');
    const child = leash(spawn(process.execPath, [...CLI_COMPILED, 'agent', 'run', 'test/fixtures/agents/chatty.ts', '--id', 'otlp-1', '--poll-ms', '200'], {
      env: { ...process.env, DATABASE_URL: database.url, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SERVICE_NAME: 'dagent-test' },
      stdio: ['ignore', 'pipe', 'pipe'],
    }));
    let out = '';
    child.stdout.on('data', (b) => (out += b));
    child.stderr.on('data', (b) => (out += b));
    try {
      await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed', 30_000);
      child.kill('SIGTERM');
      await new Promise((r) => child.on('exit', r));
      const [task] = await rowsOf<{ id: string; fence: number }>(db, sql`select id, fence from tasks where dag_id = ${dagId}`);
      const mine = collector.spans.filter((s) => s.traceId === dagTraceId(dagId));
      // OTLP/JSON carries ids as hex: the spans the process exported are the ones the ids name.
      expect(mine.map((s) => [s.name, s.spanId, s.parentSpanId]).sort(), out).toEqual([
        ['dag exported', dagSpanId(dagId), undefined],
        ['task one', attemptSpanId(task!.id, task!.fence), dagSpanId(dagId)],
      ]);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await collector.close();
    }
  });
});
