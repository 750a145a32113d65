import { context, SpanKind, SpanStatusCode, trace, TraceFlags, type Attributes, type Context } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { attemptsForTrace, dagsFinishedForTrace, type AttemptTraceRow, type DagTraceRow, type DurableStepTrace } from '../db/queries/traces.js';
import { engineEvents } from './engine-events.js';
import { attemptSpanId, dagSpanId, dagTraceId, durableStepSpanId, stepSpanId, withSpanIds } from './trace-ids.js';

/**
 * dagent's OpenTelemetry spans: one per DAG (created → completed or cancelled), one per task attempt (claimed →
 * ended) under its DAG's, one per validation step under the attempt it judged (a step run as a validation task is
 * that task's attempt span), one per durable step (ctx.step) under the attempt that ran or replayed it. Written after the fact from the committed rows, with the ids of trace-ids.ts, so an
 * agent's own spans (it got its attempt's `traceparent` at claim) nest under its attempt wherever it ran.
 *
 * The engine says what ended (engine-events: attemptsEnded, dagsFinished); the emitter batches those, reads the
 * rows once committed, and starts and ends the spans on the registered tracer provider. A DAG's span comes from
 * the process that finished the DAG (its last completion, or its cancel), so one process sends it. An attempt still under
 * validation, or a row whose transaction has not committed yet, is looked at again on the next flushes.
 */

export const TRACE_DEFAULTS = {
  /** How often the emitter reads what ended and emits its spans. */
  flushIntervalMs: 1_000,
  /** Rows per read. */
  batch: 500,
  /** Flushes a ref is looked at again while its row is missing (uncommitted) or its attempt still under validation. */
  retries: 30,
  /** DAGs and attempts whose span this process emitted, remembered (the latest this many of each) so it emits each once. */
  remembered: 10_000,
} as const;

const TRACER_NAME = 'dagent';

export interface TraceEmitter {
  /** Emit the spans of everything that ended so far (what is ready); resolves once they are handed to the provider. */
  flush(): Promise<void>;
  /** Flush, then stop listening. */
  stop(): Promise<void>;
}

interface Pending<T> { value: T; tries: number }

/** Start emitting spans for what this process's engine ends. Costs nothing until something ends. */
export function traceEmitterStart(db: Db, opts: { log?: Logger; flushIntervalMs?: number } = {}): TraceEmitter {
  const attempts = new Map<string, Pending<{ taskId: string; fence: number }>>();
  const dags = new Map<string, Pending<string>>();
  // What this process emitted lately, so a report replayed or a DAG finished twice over is not sent twice.
  const dagsEmitted = new Set<string>();
  const attemptsEmitted = new Set<string>();
  const remember = (set: Set<string>, k: string) => {
    set.add(k);
    if (set.size > TRACE_DEFAULTS.remembered) set.delete(set.values().next().value!);
  };
  const onAttempts = ({ refs }: { refs: Array<{ taskId: string; fence: number }> }) => {
    for (const r of refs) if (!attemptsEmitted.has(`${r.taskId}:${r.fence}`)) attempts.set(`${r.taskId}:${r.fence}`, { value: r, tries: 0 });
  };
  const onDags = ({ dagIds }: { dagIds: string[] }) => {
    for (const id of dagIds) if (!dagsEmitted.has(id)) dags.set(id, { value: id, tries: 0 });
  };
  engineEvents.on('attemptsEnded', onAttempts);
  engineEvents.on('dagsFinished', onDags);

  let flushing: Promise<void> | undefined;
  const flushOnce = async () => {
    const tracer = trace.getTracer(TRACER_NAME);
    while (attempts.size > 0) {
      const batch = [...attempts.entries()].slice(0, TRACE_DEFAULTS.batch);
      const rows = await attemptsForTrace(db, batch.map(([, p]) => p.value));
      const found = new Map(rows.map((r) => [`${r.taskId}:${r.fence}`, r]));
      for (const [k, p] of batch) {
        attempts.delete(k);
        const row = found.get(k);
        // Not committed yet, or its output still under validation: the verdict ends it (and says so again).
        if (!row || row.outcome === 'validating') {
          if (p.tries < TRACE_DEFAULTS.retries) retry.push([k, { ...p, tries: p.tries + 1 }]);
          continue;
        }
        // An attempt event that came again (a replayed report) while this one waited: its span is out already.
        if (attemptsEmitted.has(k)) continue;
        attemptSpanEmit(tracer, row);
        remember(attemptsEmitted, k);
      }
    }
    if (dags.size > 0) {
      const batch = [...dags.entries()].slice(0, TRACE_DEFAULTS.batch);
      const finished = new Map((await dagsFinishedForTrace(db, batch.map(([id]) => id))).map((d) => [d.id, d]));
      for (const [id, p] of batch) {
        dags.delete(id);
        const row = finished.get(id);
        if (!row) {
          if (p.tries < TRACE_DEFAULTS.retries) dagRetry.push([id, { ...p, tries: p.tries + 1 }]);
          continue;
        }
        dagSpanEmit(tracer, row);
        remember(dagsEmitted, id);
      }
    }
  };
  const retry: Array<[string, Pending<{ taskId: string; fence: number }>]> = [];
  const dagRetry: Array<[string, Pending<string>]> = [];
  const flush = async () => {
    while (flushing) await flushing;
    flushing = flushOnce()
      .catch((err) => opts.log?.warn({ err }, 'could not emit trace spans; will try again'))
      .finally(() => {
        for (const [k, p] of retry.splice(0)) attempts.set(k, p);
        for (const [k, p] of dagRetry.splice(0)) dags.set(k, p);
        flushing = undefined;
      });
    await flushing;
  };
  const timer = setInterval(() => void flush(), opts.flushIntervalMs ?? TRACE_DEFAULTS.flushIntervalMs);
  timer.unref();
  return {
    flush,
    async stop() {
      clearInterval(timer);
      await flush();
      engineEvents.off('attemptsEnded', onAttempts);
      engineEvents.off('dagsFinished', onDags);
    },
  };
}

/** A remote parent: the span of this id in the DAG's trace, emitted by whichever process saw it end. */
function parentContext(dagId: string, spanId: string): Context {
  return trace.setSpanContext(context.active(), { traceId: dagTraceId(dagId), spanId, traceFlags: TraceFlags.SAMPLED, isRemote: true });
}

function attemptSpanEmit(tracer: ReturnType<typeof trace.getTracer>, row: AttemptTraceRow): void {
  const validation = row.validatesId !== null && row.validatesFence !== null;
  const parent = validation ? attemptSpanId(row.validatesId!, row.validatesFence!) : dagSpanId(row.dagId);
  const attributes: Attributes = {
    'dagent.dag.id': row.dagId, 'dagent.task.id': row.taskId, 'dagent.task.key': row.key, 'dagent.task.type': row.type,
    'dagent.attempt': row.attempt, 'dagent.fence': row.fence, 'dagent.outcome': row.outcome, 'dagent.cost_usd': row.costUsd,
    'gen_ai.usage.input_tokens': row.tokensIn, 'gen_ai.usage.output_tokens': row.tokensOut,
  };
  if (row.agentId) attributes['dagent.agent.id'] = row.agentId;
  if (row.model) attributes['gen_ai.request.model'] = row.model;
  if (row.errorClass) attributes['error.type'] = row.errorClass;
  if (validation) attributes['dagent.validates.task_id'] = row.validatesId!;
  const span = withSpanIds({ spanId: attemptSpanId(row.taskId, row.fence) }, () => tracer.startSpan(
    validation ? `validate ${row.type}` : `task ${row.key}`,
    { kind: SpanKind.INTERNAL, startTime: row.startedAt, attributes },
    parentContext(row.dagId, parent),
  ));
  if (row.outcome === 'failed') span.setStatus({ code: SpanStatusCode.ERROR, message: row.errorMessage ?? row.errorClass ?? 'failed' });
  span.end(row.endedAt);
  // Steps checked in process (json_schema, regex) have no task of their own: a span each, under the attempt.
  for (const v of row.verdicts ?? []) {
    if (v.validation_task_id) continue;
    const end = row.endedAt;
    const step = withSpanIds({ spanId: stepSpanId(row.taskId, row.fence, v.step) }, () => tracer.startSpan(`validate ${v.kind}`, {
      kind: SpanKind.INTERNAL, startTime: new Date(end.getTime() - (v.duration_ms ?? 0)),
      attributes: { 'dagent.task.id': row.taskId, 'dagent.validation.step': v.step, 'dagent.validation.kind': v.kind, 'dagent.validation.pass': v.pass },
    }, parentContext(row.dagId, attemptSpanId(row.taskId, row.fence))));
    if (!v.pass) step.setStatus({ code: SpanStatusCode.ERROR, message: 'the output failed this step' });
    step.end(end);
  }
  for (const d of row.durableSteps) durableStepSpanEmit(tracer, row, d);
}

/**
 * A durable step: run and recorded (from when it began, as its agent said, to when it was recorded), or replayed (an
 * instant: its result was read back, nothing was paid). Spend is the step's own; a replay's is what it saved.
 */
function durableStepSpanEmit(tracer: ReturnType<typeof trace.getTracer>, row: AttemptTraceRow, d: DurableStepTrace): void {
  const start = d.replayed ? d.at : d.startedAt ?? new Date(d.at.getTime() - (d.durationMs ?? 0));
  const attributes: Attributes = {
    'dagent.task.id': row.taskId, 'dagent.step.name': d.name, 'dagent.step.scope': d.scope, 'dagent.step.replayed': d.replayed,
    'dagent.cost_usd': d.replayed ? 0 : d.costUsd,
  };
  if (d.replayed) attributes['dagent.step.replayed_cost_usd'] = d.costUsd;
  else {
    attributes['gen_ai.usage.input_tokens'] = d.tokensIn;
    attributes['gen_ai.usage.output_tokens'] = d.tokensOut;
    if (d.model) attributes['gen_ai.request.model'] = d.model;
  }
  const span = withSpanIds({ spanId: durableStepSpanId(row.taskId, row.fence, d.name, d.replayed) }, () => tracer.startSpan(
    `step ${d.name}${d.replayed ? ' (replayed)' : ''}`,
    { kind: SpanKind.INTERNAL, startTime: start, attributes },
    parentContext(row.dagId, attemptSpanId(row.taskId, row.fence)),
  ));
  span.end(d.at);
}

function dagSpanEmit(tracer: ReturnType<typeof trace.getTracer>, row: DagTraceRow): void {
  const span = withSpanIds({ traceId: dagTraceId(row.id), spanId: dagSpanId(row.id) }, () => tracer.startSpan(`dag ${row.name}`, {
    root: true, kind: SpanKind.INTERNAL, startTime: row.createdAt,
    attributes: {
      'dagent.dag.id': row.id, 'dagent.dag.name': row.name, 'dagent.dag.status': row.status, 'dagent.cost_usd': row.spentUsd,
      'dagent.dag.tasks': row.tasksTotal, 'dagent.dag.created_by': row.createdBy,
    },
  }));
  span.end(row.completedAt);
}
