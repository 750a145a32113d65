import { z } from 'zod';
import { INSTANT_EARLIEST, INSTANT_EARLIEST_MS, INSTANT_LATEST, INSTANT_LATEST_MS, isoInstantRead } from '../durations.js';

/**
 * Instants in answers. A handler returns the Date the engine gives; JSON sends it as ISO 8601 text (its toJSON). The
 * schemas describe the JSON as sent, so an instant is a codec: its input (what the handler's return type is checked
 * against) is a Date, its output (what OpenAPI publishes and the dashboard's types say) the string.
 */
export const instant = z.codec(z.date(), z.string().meta({ format: 'date-time' }), {
  decode: (d) => d.toISOString(),
  encode: (s) => new Date(s),
}).describe('an instant, ISO 8601 in UTC (2026-11-27T09:30:00.000Z)');

/** Why an instant a request gives is not one dagent takes (isoInstantRead; as ms since the epoch, the same range), or null. */
function instantInputProblem(v: string | number): string | null {
  if (typeof v === 'number') {
    return v >= INSTANT_EARLIEST_MS && v <= INSTANT_LATEST_MS ? null
      : `${v} is outside the years 1 to 9999: ms since the epoch from ${INSTANT_EARLIEST_MS} (${INSTANT_EARLIEST}) to ${INSTANT_LATEST_MS} (${INSTANT_LATEST})`;
  }
  const read = isoInstantRead(v);
  return typeof read === 'string' ? read : null;
}

const instantRefine = (v: string | number, ctx: z.RefinementCtx) => {
  const problem = instantInputProblem(v);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
};

/**
 * An instant a request gives (a list's `from` and `to`): ISO 8601 with an offset, in the years 1 to 9999 with an
 * offset of at most ±14:00, on a day that exists (isoInstantRead); anything else is a 400 naming the field, never
 * PostgreSQL's error. It stays the text sent, so a query reads its microseconds. Every request field that takes a
 * date uses this type, or instantOrEpochMsInput.
 */
export const instantInput = z.string().max(64).superRefine(instantRefine).meta({ format: 'date-time' })
  .describe(`ISO 8601 with offset (2026-11-27T09:30:00Z), ${INSTANT_EARLIEST} to ${INSTANT_LATEST}, offset at most ±14:00`);

/** instantInput, or the same range as milliseconds since the epoch (a log line's `at`). */
export const instantOrEpochMsInput = z.union([z.string().max(64), z.number()]).superRefine(instantRefine)
  .describe(`ISO 8601 with offset (2026-11-27T09:30:00Z) or ms since the epoch, ${INSTANT_EARLIEST} to ${INSTANT_LATEST}`);
