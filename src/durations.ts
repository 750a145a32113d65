import { z } from 'zod';

/**
 * Durations and instants as DAG files and requests write them (`30s`, `5m`, `2026-12-01T09:00:00Z`).
 * At the bottom of the tree: the file format, the validation step kinds, the wire schemas and the
 * list cursors all read them.
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

/**
 * The instants dagent takes from outside (a request's field, a DAG file, a list's cursor): years 1 to 9999, as
 * written and in UTC, with an offset of at most ±14:00 (the widest any time zone uses), on a day and at a time that
 * exist. PostgreSQL refuses year 0, and JavaScript writes a year past 9999 as `+275760-…`, which it refuses too:
 * each reached the database and was a 500.
 */
export const INSTANT_EARLIEST = '0001-01-01T00:00:00Z';
export const INSTANT_LATEST = '9999-12-31T23:59:59.999Z';
export const INSTANT_EARLIEST_MS = Date.parse(INSTANT_EARLIEST);
export const INSTANT_LATEST_MS = Date.parse(INSTANT_LATEST);
const OFFSET_MAX_MINUTES = 14 * 60;

/** ISO 8601 date-time with offset: `2026-12-01T09:00:00Z`, `2026-12-01T09:00+01:00`, `…:00.123456-05:00`. */
export const ISO_INSTANT_PATTERN = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2}))$/;

/** An ISO 8601 date-time with offset as a Date, or why dagent does not take it (the message quotes it). */
export function isoInstantRead(s: string): Date | string {
  const m = ISO_INSTANT_PATTERN.exec(s);
  if (!m) return `"${s}" is not an ISO 8601 date-time with offset (2026-12-01T09:00:00Z)`;
  const [y, mo, d, h, mi, sec, oh, om] = m.slice(1).map((v) => (v === undefined ? 0 : Number(v))) as number[];
  const outside = `"${s}" is outside the years 1 to 9999 (${INSTANT_EARLIEST} to ${INSTANT_LATEST})`;
  if (y! < 1) return outside;
  // Date.parse rolls 2026-02-30 over to March; setUTCFullYear, unlike Date.UTC, takes years below 100 as written.
  const day = new Date(0);
  day.setUTCFullYear(y!, mo! - 1, d!);
  if (day.getUTCMonth() !== mo! - 1 || day.getUTCDate() !== d || h! > 23 || mi! > 59 || sec! > 59) return `"${s}" is not a valid date-time`;
  if (om! > 59 || oh! * 60 + om! > OFFSET_MAX_MINUTES) return `"${s}": the offset must be at most ±14:00`;
  const ms = Date.parse(s);
  if (Number.isNaN(ms)) return `"${s}" is not a valid date-time`;
  if (ms < INSTANT_EARLIEST_MS || ms > INSTANT_LATEST_MS) return outside;
  return new Date(ms);
}

/** Parses an instant, or returns an error message. */
export function instantParse(s: string): Instant | string {
  if (DURATION_PATTERN.test(s)) {
    const inSeconds = durationSeconds(s);
    return inSeconds <= DURATION_MAX_SEC ? { inSeconds } : `"${s}" is further off than 366 days`;
  }
  if (!ISO_INSTANT_PATTERN.test(s)) {
    return `"${s}" is neither an ISO 8601 date-time with offset (2026-12-01T09:00:00Z) nor a duration (2h)`;
  }
  const at = isoInstantRead(s);
  return typeof at === 'string' ? at : { at: at.toISOString() };
}
