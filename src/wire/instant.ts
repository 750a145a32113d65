import { z } from 'zod';

/**
 * Instants in answers. A handler returns the Date the engine gives; JSON sends it as ISO 8601 text (its toJSON). The
 * schemas describe the JSON as sent, so an instant is a codec: its input (what the handler's return type is checked
 * against) is a Date, its output (what OpenAPI publishes and the dashboard's types say) the string.
 */
export const instant = z.codec(z.date(), z.string().meta({ format: 'date-time' }), {
  decode: (d) => d.toISOString(),
  encode: (s) => new Date(s),
}).describe('an instant, ISO 8601 in UTC (2026-11-27T09:30:00.000Z)');

/**
 * An instant a read model takes from its SQL as PostgreSQL prints it (`2026-11-27 09:30:00.123+00`, also ISO 8601
 * but with a space and a short offset), though the row's type says Date: either comes as the text it is.
 */
export const instantText = z.codec(z.union([z.date(), z.string()]), z.string(), {
  decode: (v) => (typeof v === 'string' ? v : v.toISOString()),
  encode: (s) => s,
}).describe('an instant: ISO 8601 (2026-11-27T09:30:00.000Z), or as PostgreSQL prints it (2026-11-27 09:30:00.123+00)');
