import { Cron } from 'croner';

/**
 * Cron expressions through croner: 5 fields (minute first), or 6 with seconds
 * first; @hourly, @daily and the like; read in an IANA time zone (default UTC).
 *
 * Across DST (asserted in test/schedules): a wall time that does not exist
 * (02:30 on a spring-forward night) runs at the shifted instant (03:30 summer
 * time), and a wall time that occurs twice (fall back) runs once, at its first
 * occurrence. Two croner 10 quirks are worked around here: a Cron object keeps
 * state between calls (so each call gets a fresh one), and asked for the next
 * run from inside a repeated hour it can answer an instant in the past (so the
 * reference moves forward until it does not). Instants are chained from the
 * previous fire, the path on which croner skips nothing.
 */
function cronOf(expr: string, timezone: string): Cron {
  return new Cron(expr, { timezone, paused: true, legacyMode: true });
}

/** The first fire strictly after `t`, or null if the expression never fires again. */
export function cronNextAfter(expr: string, timezone: string, t: Date): Date | null {
  for (let probe = t, i = 0; i < 24 * 60; i++, probe = new Date(probe.getTime() + 60_000)) {
    const r = cronOf(expr, timezone).nextRun(probe);
    if (!r || r > t) return r;
  }
  return null;
}

/** Why the expression or zone is unusable, or undefined if it is fine. */
export function cronProblem(expr: string, timezone = 'UTC'): { field: 'cron' | 'timezone'; message: string } | undefined {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    return { field: 'timezone', message: `unknown time zone "${timezone}" (use an IANA name such as Europe/Berlin or UTC)` };
  }
  try {
    if (!cronOf(expr, timezone).nextRun(new Date())) return { field: 'cron', message: `cron expression "${expr}" never fires` };
  } catch (e) {
    return { field: 'cron', message: `invalid cron expression "${expr}": ${(e as Error).message.replace(/^CronPattern: /, '')}` };
  }
  return undefined;
}

/** `from` (itself a fire instant) and the fires after it, up to `to`, ascending; at most `max`. */
export function cronInstantsBetween(expr: string, timezone: string, from: Date, to: Date, max: number): Date[] {
  const out: Date[] = [];
  for (let t: Date | null = from; t && t <= to && out.length < max; t = cronNextAfter(expr, timezone, t)) out.push(t);
  return out;
}

/** The next `count` fires after `t`. */
export function cronNextRuns(expr: string, timezone: string, t: Date, count: number): Date[] {
  const out: Date[] = [];
  for (let r = cronNextAfter(expr, timezone, t); r && out.length < count; r = cronNextAfter(expr, timezone, r)) out.push(r);
  return out;
}
