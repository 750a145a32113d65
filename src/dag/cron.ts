import { Cron } from 'croner';

/**
 * Cron expressions through croner: 5 fields (minute first), 6 with seconds
 * first, or 7 with a year last; names (MON, JAN); @hourly, @daily and the like;
 * read in an IANA time zone (default UTC). When both day fields are restricted,
 * a day matching either fires (Vixie cron's OR).
 *
 * Across DST (asserted in test/schedules): a wall time that does not exist
 * (02:30 on a spring-forward night) runs at the shifted instant (03:30 summer
 * time); a wall time that occurs twice (fall back) runs once, at its first
 * occurrence, so interval schedules pause for the repeated hour.
 *
 * croner 10 needs handling: a Cron object keeps state between calls (each call
 * here gets a fresh one), and "next run after t" is wrong when t lies inside a
 * repeated hour (it can answer an instant in the past) or just after a skipped
 * one (it skips the shifted fire). Chaining from a fire instant is reliable, so
 * the next fire after an arbitrary t is found from the last fire at or before t.
 */
function cronOf(expr: string, timezone: string): Cron {
  return new Cron(expr, { timezone, paused: true, domAndDow: false });
}

/** The latest fires at or before `t`, newest first (at most `n`). */
function cronFiresUpTo(expr: string, timezone: string, t: Date, n: number): Date[] {
  // previousRuns is strictly before its (whole-second) reference: look from one second on, keep those ≤ t.
  return cronOf(expr, timezone).previousRuns(n + 1, new Date(t.getTime() + 1000)).filter((d) => d <= t).slice(0, n);
}

/** The first fire strictly after `t`, or null if the expression never fires again. */
export function cronNextAfter(expr: string, timezone: string, t: Date): Date | null {
  let r = cronOf(expr, timezone).nextRun(cronFiresUpTo(expr, timezone, t, 1)[0] ?? t);
  // A fire at exactly t, or a backward answer: chain on from it.
  for (let i = 0; r && r <= t && i < 10_000; i++) r = cronOf(expr, timezone).nextRun(r);
  return r && r > t ? r : null;
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

/** Most due fires counted one by one; past it the count is a lower bound (croner costs ~0.3 ms a step). */
export const DUE_COUNT_CAP = 1_000;

export interface DueFires {
  /** Fires in [from, to]; exact unless `atLeast`. */
  count: number;
  atLeast: boolean;
  /** The newest `keep` of them, ascending. */
  newest: Date[];
}

/** The fires due in [from, to], where `from` is itself a fire instant (a schedule's next_fire_at). */
export function cronDue(expr: string, timezone: string, from: Date, to: Date, keep: number): DueFires {
  const chain: Date[] = [];
  for (let t: Date | null = from; t && t <= to && chain.length <= DUE_COUNT_CAP; t = cronOf(expr, timezone).nextRun(t)) chain.push(t);
  if (chain.length <= DUE_COUNT_CAP) return { count: chain.length, atLeast: false, newest: chain.slice(-keep) };
  // A long outage: the newest fires come from looking back from `to`, not from walking forward to it.
  const newest = cronFiresUpTo(expr, timezone, to, keep).filter((d) => d >= from).reverse();
  return { count: DUE_COUNT_CAP, atLeast: true, newest };
}

/** The next `count` fires after `t`. */
export function cronNextRuns(expr: string, timezone: string, t: Date, count: number): Date[] {
  const out: Date[] = [];
  for (let r = cronNextAfter(expr, timezone, t); r && out.length < count; r = cronNextAfter(expr, timezone, r)) out.push(r);
  return out;
}
