/**
 * JSON with every object's keys sorted and undefined left out: two values that say the same compare equal, whatever
 * order their keys came in (PostgreSQL's jsonb, for one, gives them back in an order of its own).
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => (v && typeof v === 'object' && !Array.isArray(v)
    ? Object.fromEntries(Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    : v));
}
