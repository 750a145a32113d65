import { afterAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { testDatabase } from '../helpers/db.js';
import { eventually } from '../helpers/wait.js';
import { ReadyListener } from '../../src/db/ready-listener.js';

// Each process whose claims wait for work takes its part of a READY hint by where it stands among the database's
// listening processes: every one of them must read the same roster, and a process that leaves must drop out of it.
const database = await testDatabase();
const started: ReadyListener[] = [];
afterAll(() => Promise.all(started.map((l) => l.stop())));

async function listener(keep: boolean): Promise<ReadyListener> {
  const l = new ReadyListener({ url: database.sessionUrl, rosterIntervalMs: 100 });
  if (keep) l.rosterKeep();
  await l.start();
  started.push(l);
  return l;
}

const rosters = (ls: ReadyListener[]) => ls.map((l) => l.roster);

describe('the listeners roster', () => {
  it('every process whose claims wait reads how many do and a rank of its own; one that stops drops out, one that joins counts', async () => {
    const kept = [await listener(true), await listener(true), await listener(true)];
    // A listener that keeps no roster (its process's claims never wait: events, revocations) is no member.
    const quiet = await listener(false);
    // Other connections to the database (the test's pool, a client of another name) are not listeners.
    const other = new pg.Client({ connectionString: database.sessionUrl, application_name: 'not-a-listener' });
    await other.connect();
    try {
      await eventually('three members seen by all three', async () => rosters(kept).every((r) => r.members === 3));
      expect(rosters(kept).map((r) => r.rank).sort()).toEqual([0, 1, 2]);
      expect(quiet.roster).toEqual({ members: 1, rank: 0 });
      await kept[1]!.stop();
      expect(kept[1]!.roster).toEqual({ members: 1, rank: 0 });
      const left = [kept[0]!, kept[2]!];
      await eventually('two members seen by the two left', async () => rosters(left).every((r) => r.members === 2));
      expect(rosters(left).map((r) => r.rank).sort()).toEqual([0, 1]);
      // One that joins later, after it connected, takes the roster's name then, and counts.
      const late = await listener(false);
      late.rosterKeep();
      await eventually('three members again', async () => [...rosters(left), late.roster].every((r) => r.members === 3));
    } finally {
      await other.end();
    }
  });
});
