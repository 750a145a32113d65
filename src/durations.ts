import { z } from 'zod';

/**
 * Durations and instants as DAG files write them (`30s`, `5m`, `2026-12-01T09:00:00Z`).
 * At the bottom of the tree: the file format and the validation step kinds both read them.
 */
export const DURATION_PATTERN = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;

/**
 * The longest duration dagent accepts anywhere (an estimate, a retry delay, a timeout, a
 * relative not_before): 366 days. Beyond it, times overflow PostgreSQL's intervals and
 * JavaScript's timers, and a retry that far off is a dead letter in all but name.
 */
export const DURATION_MAX_SEC = 366 * 86_400;
const tooLong = `must be at most 366 days (${DURATION_MAX_SEC} seconds)`;

export const durationSchema = z.union([
  z.number().nonnegative().max(DURATION_MAX_SEC, { error: tooLong }),
  z.string().regex(DURATION_PATTERN, { error: 'must be a duration like 30s, 5m, 2h, 1d or a number of seconds' })
    .refine((d) => !DURATION_PATTERN.test(d) || durationSeconds(d) <= DURATION_MAX_SEC, { error: tooLong }),
]).describe('duration: number of seconds, or a string like 500ms, 30s, 5m, 2h, 1d (at most 366 days)');

const UNIT_SECONDS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 };

/** Seconds in a duration written as a number of seconds or as `30s`, `5m`, `2h`, `1d`, `500ms`. */
export function durationSeconds(d: number | string): number {
  if (typeof d === 'number') return d;
  const m = DURATION_PATTERN.exec(d);
  if (!m) throw new Error(`not a duration: ${d}`);
  return Number(m[1]) * UNIT_SECONDS[m[2]!]!;
}

/** A point in time: absolute (ISO 8601 with offset) or relative to submission, resolved later by the database clock. */
export type Instant = { at: string } | { inSeconds: number };

const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

/** Parses an instant, or returns an error message. */
export function instantParse(s: string): Instant | string {
  if (DURATION_PATTERN.test(s)) {
    const inSeconds = durationSeconds(s);
    return inSeconds <= DURATION_MAX_SEC ? { inSeconds } : `"${s}" is further off than 366 days`;
  }
  if (!ISO_WITH_OFFSET.test(s)) {
    return `"${s}" is neither an ISO 8601 date-time with offset (2026-12-01T09:00:00Z) nor a duration (2h)`;
  }
  if (Number.isNaN(Date.parse(s)) || !calendarValid(s)) return `"${s}" is not a valid date-time`;
  return { at: new Date(s).toISOString() };
}

/** Date.parse rolls 2026-02-30 over to March; refuse dates and times that do not exist. */
function calendarValid(s: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?/.exec(s);
  if (!m) return false;
  const [y, mo, d, h, mi, sec] = m.slice(1).map((v) => (v === undefined ? 0 : Number(v))) as number[];
  const date = new Date(Date.UTC(y!, mo! - 1, d!));
  return date.getUTCMonth() === mo! - 1 && date.getUTCDate() === d && h! <= 23 && mi! <= 59 && sec! <= 59;
}
