import { sql } from 'drizzle-orm';
import type { Db } from '../connection.js';
import { rowsOf } from './run.js';

/**
 * Cadence gate (pg-boss's trick): true for exactly one caller per interval across
 * all processes, because only one UPDATE can move `ran_at` past the interval.
 */
export async function gatePass(db: Db, name: string, intervalSec: number): Promise<boolean> {
  const rows = await rowsOf(db, sql`
    insert into maintenance_gates (name, ran_at) values (${name}, now())
    on conflict (name) do update set ran_at = now()
      where maintenance_gates.ran_at <= now() - make_interval(secs => ${intervalSec})
    returning 1`);
  return rows.length > 0;
}
