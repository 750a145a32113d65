import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { nanoid } from 'nanoid';
import { testDatabase } from '../helpers/db.js';
import { cliWith } from '../helpers/cli.js';
import { databaseOpen } from '../../src/db/open.js';
import { dagCreate } from '../helpers/factories.js';
import { testHttp } from '../helpers/http.js';
import { eventually } from '../helpers/wait.js';

// A server with no room for another connection answers 53300 (too many clients). A role allowed one connection
// gets the same code from a real server as soon as it holds one: the full server, reproduced for one role.
const database = await testDatabase();
const role = `dagent_one_conn_${nanoid(6).toLowerCase().replace(/[^a-z0-9]/g, 'x')}`;
const roleUrl = (() => {
  const u = new URL(database.url);
  u.username = role;
  u.password = 'one-conn';
  return u.toString();
})();

beforeAll(async () => {
  await database.pool.query(`create role ${role} login password 'one-conn' connection limit 1`);
  const dbName = new URL(database.url).pathname.slice(1);
  await database.pool.query(`grant all on database ${dbName} to ${role}`);
  await database.pool.query(`grant all on schema dagent to ${role}`);
  await database.pool.query(`grant all on all tables in schema dagent to ${role}`);
  await database.pool.query(`grant all on all sequences in schema dagent to ${role}`);
});
afterAll(async () => {
  await database.pool.query(`select pg_terminate_backend(pid) from pg_stat_activity where usename = $1`, [role]);
  await database.pool.query(`drop owned by ${role}`);
  await database.pool.query(`drop role ${role}`);
});

/** The role's one connection, held until released. */
async function connectionHeld(): Promise<{ release: () => Promise<void>; released: () => boolean }> {
  const client = new pg.Client({ connectionString: roleUrl });
  client.on('error', () => {});
  await client.connect();
  let done = false;
  return { release: async () => { done = true; await client.end(); }, released: () => done };
}

describe('a server with no free connections', () => {
  it('a pool waits for room (53300), and the statement runs once a connection is freed', async () => {
    const held = await connectionHeld();
    const d = await databaseOpen({ url: roleUrl, migrate: false, poolSize: 2, connectTimeoutSec: 10 });
    try {
      setTimeout(() => void held.release(), 400);
      const { rows } = await d.pool.query<{ one: number }>('select 1 as one');
      expect(rows).toEqual([{ one: 1 }]);
      // It waited: the statement could only run on the connection the holder gave up.
      expect(held.released()).toBe(true);
    } finally {
      await d.close();
    }
  });

  it('past the connect timeout, the server\'s own error (53300) is thrown; other errors are not retried', async () => {
    const held = await connectionHeld();
    const d = await databaseOpen({ url: roleUrl, migrate: false, poolSize: 2, connectTimeoutSec: 1 });
    try {
      await expect(d.pool.query('select 1')).rejects.toMatchObject({ code: '53300' });
    } finally {
      await d.close();
      await held.release();
    }
    // A wrong password or database is no "for now": it fails at once, with its own code.
    const missing = new URL(database.url);
    missing.pathname = '/dagent_no_such_database';
    const bad = await databaseOpen({ url: missing.toString(), migrate: false, connectTimeoutSec: 10 });
    try {
      await expect(bad.pool.query('select 1')).rejects.toMatchObject({ code: '3D000' });
    } finally {
      await bad.close();
    }
  });

  it('dagent status, whose reads run side by side, completes on a role allowed one connection', async () => {
    const dagId = await dagCreate(database.db, 'name: one-conn\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');
    const r = await cliWith({ ...process.env, DATABASE_URL: roleUrl })('status', dagId);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(dagId);
  });

  it('a command that meets a full server after it opened says so in one line, exit 5, no stack', async () => {
    const dagId = await dagCreate(database.db, 'name: full\ntasks:\n  a: { type: t }\n');
    // Three of the command's four side-by-side reads need the tasks table, locked here: whichever holds the one
    // connection (the role's only one) waits on the lock, and the others find no room for a second connection until
    // the connect timeout (10 s). The role's lock_timeout (20 s) then ends the wait, so the command's close, which waits
    // for its statement in flight, finishes; the lock is held throughout, so no connection frees up in time.
    await database.pool.query(`alter role ${role} set lock_timeout = '20s'`);
    const locker = await database.pool.connect();
    await locker.query('begin');
    await locker.query('lock table dagent.tasks in access exclusive mode');
    let r: Awaited<ReturnType<ReturnType<typeof cliWith>>>;
    try {
      r = await cliWith({ ...process.env, DATABASE_URL: roleUrl })('status', dagId);
    } finally {
      await locker.query('rollback');
      locker.release();
      await database.pool.query(`alter role ${role} reset lock_timeout`);
    }
    expect(r.code).toBe(5);
    expect(r.stderr).toMatch(/^error: PostgreSQL at [^ ]+ refused: too many connections for role "dagent_one_conn_\w+"; the server has no free connections; retry, or lower other clients' pools\n$/);
  }, 40_000);

  it('over HTTP, a request that finds no free connection within the timeout is a 503 with Retry-After, not a 500', async () => {
    const roleDb = await databaseOpen({ url: roleUrl, migrate: false, poolSize: 2, connectTimeoutSec: 1 });
    let held: Awaited<ReturnType<typeof connectionHeld>> | undefined;
    try {
      const http = await testHttp(roleDb);
      expect((await http.call('GET', '/api/dags')).status).toBe(200);
      // The server's pool loses its one connection, and someone else takes the role's only slot.
      await database.pool.query('select pg_terminate_backend(pid) from pg_stat_activity where usename = $1', [role]);
      held = await eventually('the role\'s slot free for another client', () => connectionHeld().catch(() => undefined));
      const r = await http.call('GET', '/api/dags');
      expect([r.status, r.body.error.code, r.headers.get('retry-after')]).toEqual([503, 'UNAVAILABLE', expect.stringMatching(/^\d+$/)]);
    } finally {
      await held?.release();
      await roleDb.close();
    }
  });
});
