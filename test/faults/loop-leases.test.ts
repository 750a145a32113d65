import { afterEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { serviceCreate, type MaintenanceService } from '../../src/maintenance/service.js';

// Two loops of the same name with different holders stand for two nodes: the lease decides which one works.
const database = await testDatabase();
const { db } = database;
const started: MaintenanceService[] = [];
afterEach(async () => { await Promise.all(started.splice(0).map((s) => s.stop())); });

function loop(name: string, node: string, runs: Record<string, number>): MaintenanceService {
  const s = serviceCreate({ name, db, node, intervalMs: 50, jitter: 0, work: async () => { runs[node] = (runs[node] ?? 0) + 1; return 0; } });
  started.push(s);
  s.start();
  return s;
}
const holderOf = async (name: string) => (await rowsOf<{ holder: string }>(db, sql`select holder from maintenance_leases where name = ${name}`))[0]?.holder;

describe('maintenance loop leases', () => {
  it('only the holder works; it gives the loop up when it stops, and the other process takes it at once', async () => {
    const runs: Record<string, number> = {};
    const a = loop('handover', 'node-a', runs);
    await eventually('node-a holds the loop', async () => (await holderOf('handover')) === 'node-a');
    loop('handover', 'node-b', runs);
    await eventually('node-a ran 10 ticks', async () => (runs['node-a'] ?? 0) >= 10);
    expect(runs['node-b']).toBeUndefined();
    // The holder's ticks also close the cadence gate that nodes of earlier versions use (a rolling upgrade).
    expect(await rowsOf(db, sql`select name from maintenance_gates where name = 'handover' and ran_at > now() - interval '1 second'`)).toEqual([{ name: 'handover' }]);
    await a.stop();
    const aRuns = runs['node-a'];
    await eventually('node-b took the loop over and works', async () => (await holderOf('handover')) === 'node-b' && (runs['node-b'] ?? 0) >= 5);
    expect(runs['node-a']).toBe(aRuns);
  });

  it('a holder that stopped renewing (killed) keeps the loop until its lease lapses, by the database clock; then another takes it', async () => {
    const [ghost] = await rowsOf<{ expires_at: string }>(db, sql`
      insert into maintenance_leases (name, holder, acquired_at, expires_at) values ('lapse', 'killed-node', now(), now() + interval '2 seconds')
      returning expires_at::text`);
    const worked: boolean[] = [];
    const s = serviceCreate({
      name: 'lapse', db, node: 'survivor', intervalMs: 50, jitter: 0,
      work: async () => {
        // Whether this tick came after the killed node's lease ran out, by the database's clock.
        worked.push((await rowsOf<{ after: boolean }>(db, sql`select clock_timestamp() >= ${ghost!.expires_at}::timestamptz as after`))[0]!.after);
        return 0;
      },
    });
    started.push(s);
    s.start();
    await eventually('the survivor works', async () => worked.length >= 3, 10_000);
    expect(worked.every(Boolean)).toBe(true);
    expect(await holderOf('lapse')).toBe('survivor');
  });

  it('a holder whose lease another process took (it lapsed while the holder was cut off) stops working', async () => {
    const runs: Record<string, number> = {};
    loop('stolen', 'cut-off', runs);
    await eventually('cut-off works', async () => (runs['cut-off'] ?? 0) >= 3);
    await db.execute(sql`update maintenance_leases set holder = 'usurper', expires_at = now() + interval '1 hour' where name = 'stolen'`);
    // The next lease statement finds it gone; the tick after that does no work.
    await new Promise((r) => setTimeout(r, 300));
    const settled = runs['cut-off'];
    await new Promise((r) => setTimeout(r, 500));
    expect(runs['cut-off']).toBe(settled);
    expect(await holderOf('stolen')).toBe('usurper');
  });
});
