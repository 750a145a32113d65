import { createHash, randomBytes } from 'node:crypto';
import { context, trace, TraceFlags, type Context } from '@opentelemetry/api';

/**
 * The trace ids of dagent's spans, derived from what the database already names: a DAG's trace id from its id, an
 * attempt's span id from its task and fence. So any process can give an agent the context of its attempt when it
 * claims (`traceparent`), before the attempt's span exists, and any process can emit that span once the attempt
 * ended, with the id the agent's own spans already name as their parent. No column, no coordination.
 */

function hex(input: string, chars: number): string {
  return createHash('sha256').update(input).digest('hex').slice(0, chars);
}

/** 32 hex digits: the trace of one DAG run. */
export function dagTraceId(dagId: string): string {
  return hex(`dagent:trace:${dagId}`, 32);
}

/** 16 hex digits: the DAG's own span, the root of its trace. */
export function dagSpanId(dagId: string): string {
  return hex(`dagent:dag:${dagId}`, 16);
}

/** 16 hex digits: one attempt of a task (its fence names the attempt). */
export function attemptSpanId(taskId: string, fence: number): string {
  return hex(`dagent:attempt:${taskId}:${fence}`, 16);
}

/** 16 hex digits: an inline validation step (json_schema, regex) of an attempt's output. */
export function stepSpanId(taskId: string, fence: number, step: number): string {
  return hex(`dagent:step:${taskId}:${fence}:${step}`, 16);
}

/** The W3C trace context an agent's spans nest under: its attempt's span, sampled. */
export function attemptTraceparent(dagId: string, taskId: string, fence: number): string {
  return `00-${dagTraceId(dagId)}-${attemptSpanId(taskId, fence)}-01`;
}

/** The ids the next span started in this process must have (set by withSpanIds, read by dagentIdGenerator). */
let pending: { traceId?: string; spanId: string } | undefined;

/**
 * Start a span with these ids: `start` must start exactly one span, synchronously (Tracer.startSpan is). Only an
 * SDK built with dagentIdGenerator honours them (tracingStart builds one; an embedding program passes it to its own).
 */
export function withSpanIds<T>(ids: { traceId?: string; spanId: string }, start: () => T): T {
  pending = ids;
  try {
    return start();
  } finally {
    pending = undefined;
  }
}

/** An OpenTelemetry SDK IdGenerator: random ids, except for the spans dagent starts with withSpanIds. */
export const dagentIdGenerator = {
  generateTraceId(): string {
    return pending?.traceId ?? randomBytes(16).toString('hex');
  },
  generateSpanId(): string {
    return pending?.spanId ?? randomBytes(8).toString('hex');
  },
};

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The active context with this W3C trace context as its (remote) parent: what an attempt's handler runs in. */
export function traceparentContext(traceparent: string, base: Context = context.active()): Context {
  const m = TRACEPARENT.exec(traceparent);
  if (!m) return base;
  return trace.setSpanContext(base, { traceId: m[1]!, spanId: m[2]!, traceFlags: parseInt(m[3]!, 16) & TraceFlags.SAMPLED, isRemote: true });
}
