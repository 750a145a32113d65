import type { LanguageModelV4StreamPart } from '@ai-sdk/provider';

/** A streamed answer as its step records it: the parts, deltas of one block joined, dates as ISO text. */
export interface RecordedStream { parts: unknown[] }

type Delta = Extract<LanguageModelV4StreamPart, { type: 'text-delta' | 'reasoning-delta' | 'tool-input-delta' }>;
const isDelta = (p: LanguageModelV4StreamPart): p is Delta => p.type === 'text-delta' || p.type === 'reasoning-delta' || p.type === 'tool-input-delta';

/**
 * The parts to record, smaller: adjacent deltas of the same block joined into one (a token-by-token answer would
 * otherwise store a part per token), the response's timestamp as text.
 */
export function streamPartsCompact(parts: LanguageModelV4StreamPart[]): unknown[] {
  const out: unknown[] = [];
  let last: Delta | undefined;
  for (const p of parts) {
    if (isDelta(p) && last && last.type === p.type && last.id === p.id && p.providerMetadata === undefined) {
      last.delta += p.delta;
      continue;
    }
    if (isDelta(p)) {
      last = { ...p };
      out.push(last);
      continue;
    }
    last = undefined;
    out.push(p.type === 'response-metadata' && p.timestamp instanceof Date ? { ...p, timestamp: p.timestamp.toISOString() } : p);
  }
  return out;
}

/** A recorded answer as the stream a caller reads: the same parts, the timestamp a Date again. */
export function streamPartsReplay(parts: unknown[]): ReadableStream<LanguageModelV4StreamPart> {
  const revived = (parts as Array<LanguageModelV4StreamPart & { timestamp?: unknown }>).map((p) =>
    (p.type === 'response-metadata' && typeof p.timestamp === 'string' ? { ...p, timestamp: new Date(p.timestamp) } : p) as LanguageModelV4StreamPart);
  return new ReadableStream<LanguageModelV4StreamPart>({
    start(controller) {
      for (const p of revived) controller.enqueue(p);
      controller.close();
    },
  });
}

/** The text of an answer's parts. */
export function streamTextOf(parts: readonly unknown[]): string {
  return (parts as LanguageModelV4StreamPart[]).map((p) => (p.type === 'text-delta' ? p.delta : '')).join('');
}
