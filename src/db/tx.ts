import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import * as schema from './schema/index.js';
import { isConnectionLost, isTransientConflict } from './pg-errors.js';
import type { Db } from './handle.js';

/** Work to run once a transaction has committed, with the handle the transaction was opened on. */
type AfterCommit = (db: Db) => Promise<unknown>;
const afterCommitQueues = new WeakMap<object, AfterCommit[]>();

/**
 * Run `fn` in one transaction (a savepoint inside another). On the pool, the connection is taken
 * here rather than by drizzle, whose transaction never gives its connection back when BEGIN itself
 * fails (a server lost or gone silent at that moment): here it goes back, dropped if it broke.
 * What `afterCommit` queued inside runs once the outermost transaction has committed, not on rollback.
 */
export async function withTx<T>(db: Db, fn: (tx: Db) => Promise<T>): Promise<T> {
  const outer = afterCommitQueues.get(db);
  const queue = outer ?? [];
  const inTx = (tx: Db) => {
    afterCommitQueues.set(tx, queue);
    return fn(tx);
  };
  const pool = (db as unknown as { $client?: unknown }).$client;
  let result: T;
  if (!(pool instanceof pg.Pool)) {
    result = await db.transaction((tx) => inTx(tx as unknown as Db));
  } else {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      result = await clientDb(client).transaction((tx) => inTx(tx as unknown as Db));
    } catch (e) {
      if (isConnectionLost(e)) broken = e as Error;
      throw e;
    } finally {
      client.release(broken);
    }
  }
  if (!outer) for (const work of queue) await work(db);
  return result;
}

/**
 * Run `work` once what `db` is in has committed: at once when `db` is no transaction (its
 * statements commit as they run), else after withTx's outermost transaction commits.
 * For work that must see a transaction's effects from a fresh snapshot and must not hold its locks.
 */
export async function afterCommit(db: Db, work: AfterCommit): Promise<void> {
  const queue = afterCommitQueues.get(db);
  if (queue) queue.push(work);
  else await work(db);
}

/** One drizzle handle per pooled connection, made once (building it reads the whole schema). */
type ClientHandle = NodePgDatabase<typeof schema>;
const clientHandles = new WeakMap<pg.PoolClient, ClientHandle>();
function clientDb(client: pg.PoolClient): ClientHandle {
  let handle = clientHandles.get(client);
  if (!handle) {
    handle = drizzle(client, { schema });
    clientHandles.set(client, handle);
  }
  return handle;
}

/**
 * withTx, run again (up to `tries` times in all) when PostgreSQL aborts it as a deadlock victim or a
 * serialization failure; for transactions that lock rows other writers hold in another order and
 * whose every effect is inside the transaction.
 */
export async function withTxRetried<T>(db: Db, fn: (tx: Db) => Promise<T>, tries = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await withTx(db, fn);
    } catch (e) {
      if (attempt >= tries || !isTransientConflict(e)) throw e;
    }
  }
}
