import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../src/db/open.js';
import { isConnectionLost } from '../../src/db/pg-errors.js';
import { withTx } from '../../src/db/tx.js';
import { openOptionsLike, testDatabase } from '../helpers/db.js';
import { faultProxy } from './helpers/proxy.js';

// A server that went silent (a half-open path: no reset ever arrives) held every request for good,
// and kept doing so after the network healed: the pooled connections stayed stuck on their lost answers.
const database = await testDatabase();
const proxy = await faultProxy(database.url);

describe('a database that goes silent', () => {
  it('fails statements after the query timeout as unavailable, and the first statement after the network heals succeeds', async () => {
    const d = await databaseOpen({ ...openOptionsLike(database, proxy.url), migrate: false, poolSize: 1, queryTimeoutSec: 1, connectTimeoutSec: 1 });
    try {
      expect((await d.db.execute(sql`select 1 as one`)).rows).toEqual([{ one: 1 }]);
      proxy.set('blackhole');
      // Inside a transaction too: its connection is closed, not handed back to the pool still waiting.
      const stuck = await withTx(d.db, (tx) => tx.execute(sql`select 2`)).catch((e: unknown) => e);
      expect(isConnectionLost(stuck)).toBe(true);
      proxy.set('pass');
      expect((await d.db.execute(sql`select 3 as three`)).rows).toEqual([{ three: 3 }]);
    } finally {
      proxy.set('pass');
      await d.close();
    }
  });
});
