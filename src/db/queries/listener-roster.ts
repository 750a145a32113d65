// The processes whose claims wait for work on a database, as a LISTEN connection sees them. Plain SQL on the
// listener's own connection (db/ready-listener.ts), no drizzle; and no pg type in what it exports: the agent
// runtime's published declarations read this file, and a user's project need not have @types/pg.

/** What the roster needs of a connection (pg's Client is one). */
export interface RosterConnection { query(text: string, values: unknown[]): Promise<{ rows: unknown[] }> }

/**
 * How many processes wait for work on this database (their LISTEN connections' `application_name`, the roster's),
 * and where this one stands among them: `rank` is how many have a lower backend pid. Every process reads the same
 * list, so each can take its own part of a READY hint's wake-ups without asking the others (claim-wait/waiters.ts,
 * hintShare).
 */
export interface ListenerRoster { members: number; rank: number }

/** A process that knows of no other: it takes a hint's wake-ups whole. */
export const LISTENER_ROSTER_ALONE: ListenerRoster = { members: 1, rank: 0 };

/** A listener joins the roster by taking its application_name (the roster's, `$1`). */
export const listenerRosterJoinSql = `select set_config('application_name', $1, false)`;

/**
 * The roster of the connections named `applicationName`, as `client` (one of them) sees it: one scan of
 * pg_stat_activity, whose pid and application_name every role may read. Run every LISTENER_DEFAULTS.rosterIntervalMs
 * per process.
 */
export async function listenerRosterRead(client: RosterConnection, applicationName: string): Promise<ListenerRoster> {
  const { rows } = await client.query(`
    select count(*)::int as members, (count(*) filter (where pid < pg_backend_pid()))::int as rank
    from pg_stat_activity where datname = current_database() and application_name = $1`, [applicationName]);
  const r = rows[0] as ListenerRoster | undefined;
  return r && r.members > 0 ? { members: r.members, rank: r.rank } : LISTENER_ROSTER_ALONE;
}
