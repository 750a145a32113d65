import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { rowsOf } from '../helpers/factories.js';
import { EXPIRING_LEASE_STATES, HELD_STATES, LEASED_STATES, TASK_STATES, TRANSITIONS, fromStates } from '../../src/model/state-machine.js';

const { db } = await testDatabase();
const transitions = Object.values(TRANSITIONS);

describe('the state machine, as data', () => {
  it('the migrated database admits exactly its states: the tasks.status CHECK lists TASK_STATES', async () => {
    const [c] = await rowsOf<{ def: string }>(db, sql`
      select pg_get_constraintdef(oid) as def from pg_constraint where conname = 'tasks_status_ck' and conrelid = 'tasks'::regclass`);
    const admitted = [...c!.def.matchAll(/'([a-z_]+)'::text/g)].map((m) => m[1]!);
    expect([...admitted].sort()).toEqual([...TASK_STATES].sort());
  });

  it('every transition moves between states it defines, and every state is entered and left as the model says', () => {
    for (const t of transitions) for (const s of [...t.from, ...t.to]) expect(TASK_STATES).toContain(s);
    const entered = new Set<string>(transitions.flatMap((t) => t.to));
    const left = new Set<string>(transitions.flatMap((t) => t.from));
    // Inserted in these (taskInsertMany): pending, ready, created; every other state is reached by a transition.
    for (const s of TASK_STATES.filter((x) => !['created', 'pending', 'ready'].includes(x))) expect(entered.has(s), `${s} is entered`).toBe(true);
    // No state is a dead end: even a completed or cancelled task may run again (rerun).
    expect(TASK_STATES.filter((s) => !left.has(s))).toEqual([]);
    expect(TRANSITIONS.rerun.from).toEqual(expect.arrayContaining(['completed', 'cancelled']));
  });

  it('the leased states are the ones an agent holds under a fence; the reaper watches those whose lease can lapse', () => {
    for (const s of EXPIRING_LEASE_STATES) expect(LEASED_STATES).toContain(s);
    expect([...HELD_STATES].sort()).toEqual([...LEASED_STATES].sort());
    // An agent's reports leave only leased states (a signal completes a waiting task; the waits loop fails one).
    for (const t of ['start', 'heartbeat', 'submitOutput', 'release', 'rateLimit', 'waitForChildren'] as const) {
      for (const s of fromStates(t)) expect(LEASED_STATES).toContain(s);
    }
  });
});
