import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { dateOf, rowsOf } from '../statement.js';

/**
 * Take or keep the lease on maintenance loop `name` for `holder`, for `ttlSec` from now (the database's clock);
 * true when `holder` holds it after the statement. One statement: a free, lapsed or own lease is (re)written, a
 * live one of another process is left alone, and the primary key leaves exactly one holder. `tick` stamps ran_at.
 */
export async function loopLeaseHold(db: Db, name: string, holder: string, ttlSec: number, tick: boolean): Promise<boolean> {
  // A holder's tick also moves the cadence gate of the versions before leases (maintenance_gates), so their
  // nodes, during a rolling upgrade, skip what a new node runs.
  const rows = await rowsOf(db, sql`
    with lease as (
      insert into maintenance_leases as l (name, holder, acquired_at, ran_at, expires_at)
      values (${name}, ${holder}, now(), case when ${tick}::boolean then now() end, now() + make_interval(secs => ${ttlSec}))
      on conflict (name) do update set
        holder = excluded.holder,
        acquired_at = case when l.holder = excluded.holder then l.acquired_at else now() end,
        ran_at = case when ${tick}::boolean then now() else l.ran_at end,
        expires_at = excluded.expires_at
      where l.holder = excluded.holder or l.expires_at < now()
      returning 1
    ), gate as (
      insert into maintenance_gates (name, ran_at) select ${name}, now() where ${tick}::boolean and exists (select 1 from lease)
      on conflict (name) do update set ran_at = now()
    )
    select 1 from lease`);
  return rows.length > 0;
}

/** Give the lease up (a process stopping): another process takes the loop at its next tick, not after the lease. */
export async function loopLeaseRelease(db: Db, name: string, holder: string): Promise<void> {
  await db.execute(sql`delete from maintenance_leases where name = ${name} and holder = ${holder}`);
}

export interface LoopLease {
  name: string;
  holder: string;
  acquiredAt: Date;
  ranAt: Date | null;
  expiresAt: Date;
  /** False once the lease lapsed: its holder stopped renewing (killed, or cut off) and no one has taken it yet. */
  live: boolean;
}

/** Every loop's lease: which process runs it, since when, when it last ran. */
export async function loopLeaseList(db: Db): Promise<LoopLease[]> {
  const rows = await rowsOf<{ name: string; holder: string; acquired_at: string; ran_at: string | null; expires_at: string; live: boolean }>(db, sql`
    select name, holder, acquired_at, ran_at, expires_at, expires_at >= now() as live from maintenance_leases order by name`);
  return rows.map((r) => ({ name: r.name, holder: r.holder, acquiredAt: dateOf(r.acquired_at)!, ranAt: dateOf(r.ran_at), expiresAt: dateOf(r.expires_at)!, live: r.live }));
}
