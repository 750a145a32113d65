import { describe, expect, it, vi } from 'vitest';
import { ClaimWaiters, hintSeed, hintShare, type Claimant, type WaitEnd } from '../../src/claim-wait/waiters.js';
import type { ReadyListener } from '../../src/db/ready-listener.js';
import type { ListenerRoster } from '../../src/db/queries/listener-roster.js';
import { CLAIM_WAIT_DEFAULTS } from '../../src/config/index.js';

describe('hintShare: each listening process takes its part of a READY hint', () => {
  it('the parts of every process add up to the count, for any roster size and hint', () => {
    for (let members = 1; members <= 6; members++) {
      for (let count = 0; count <= 13; count++) {
        for (const seed of [0, 1, 7, 2 ** 31 + 5, 4_294_967_295]) {
          const parts = Array.from({ length: members }, (_, rank) => hintShare(count, { members, rank }, seed));
          expect(parts.reduce((n, p) => n + p.wake, 0)).toBe(count);
          // No part is more than one above another: the count is dealt round, not piled on one process.
          const wakes = parts.map((p) => p.wake);
          expect(Math.max(...wakes) - Math.min(...wakes)).toBeLessThanOrEqual(1);
          // Those given nothing look again one after the other, the nearest first: steps 1, 2, … with none twice.
          const steps = parts.filter((p) => p.wake === 0).map((p) => p.lookAgainStep).sort((a, b) => a - b);
          expect(steps).toEqual(Array.from({ length: steps.length }, (_, i) => i + 1));
          expect(parts.filter((p) => p.wake > 0).every((p) => p.lookAgainStep === 0)).toBe(true);
        }
      }
    }
  });

  it('which process a single task goes to moves with the hint, so no process takes every single one', () => {
    const given = new Set<number>();
    for (let seed = 0; seed < 30; seed++) {
      const rank = [0, 1, 2].find((r) => hintShare(1, { members: 3, rank: r }, seed).wake === 1);
      given.add(rank!);
    }
    expect([...given].sort()).toEqual([0, 1, 2]);
  });
});

/** A LISTEN connection as the waiters see it, scripted: the test sends the hints and sets the roster. */
class ScriptedListener {
  roster: ListenerRoster = { members: 1, rank: 0 };
  private readonly fns: Array<(payload?: string) => void> = [];
  rosterKept = false;
  subscribe(fn: (payload?: string) => void): () => void {
    this.fns.push(fn);
    return () => {};
  }
  rosterKeep(): void {
    this.rosterKept = true;
  }
  hint(payload: string): void {
    for (const fn of this.fns) fn(payload);
  }
}

const SHELL = { capabilities: ['shell'], models: [] };
/** The payload of `count` shell tasks becoming READY; `µs` tells hints apart, as the clock does. */
const payload = (count: number, µs: number) => `${count}/${µs}/default shell`;
/** A payload whose part (of `count`) for a process of `rank` among `members` is `wake`. */
function payloadWith(count: number, roster: ListenerRoster, wake: (part: number, payload: string) => boolean): string {
  for (let µs = 1; ; µs++) {
    const p = payload(count, µs);
    if (wake(hintShare(count, roster, hintSeed(p)).wake, p)) return p;
  }
}
/** Its turn to look again, for a process given no part of `payload`. */
const hintTurn = (count: number, roster: ListenerRoster, p: string) => hintShare(count, roster, hintSeed(p)).lookAgainStep;

function setup(roster: ListenerRoster, ready: () => boolean) {
  const listener = new ScriptedListener();
  listener.roster = roster;
  const probes: string[] = [];
  const waiters = new ClaimWaiters({
    databaseUrl: 'postgres://unused', listener: listener as unknown as ReadyListener, perAgent: 4, max: 100,
    readyInGroup: async (key) => { probes.push(key); return ready(); },
  });
  const waitFor = async (n: number) => {
    const who: Claimant[] = Array.from({ length: n }, (_, i) => ({ agentId: `a${i}` }));
    const since = await waiters.mark();
    const ends = who.map((w) => waiters.wait(w, SHELL, since, 400));
    await settled();
    return { who, ends };
  };
  return { listener, waiters, probes, waitFor };
}

/** The waits begun are waiting (each awaits the listener first). */
const settled = () => new Promise((r) => setImmediate(r));
const woken = async (ends: Array<Promise<WaitEnd>>) => (await Promise.all(ends)).filter((e) => e.woken).length;

describe('a process that shares READY hints with others', () => {
  it('keeps the roster, and wakes only its part of a hint', async () => {
    const { listener, waiters, waitFor } = setup({ members: 2, rank: 0 }, () => true);
    const { ends } = await waitFor(5);
    expect(listener.rosterKept).toBe(true);
    listener.hint(payload(4, 1));
    expect(await woken(ends)).toBe(2);
    await waiters.close();
  });

  it('alone on the roster (or without a probe), it wakes the whole count', async () => {
    const { listener, waiters, waitFor } = setup({ members: 1, rank: 0 }, () => true);
    const { ends } = await waitFor(5);
    listener.hint(payload(4, 1));
    expect(await woken(ends)).toBe(4);
    await waiters.close();
    const whole = new ClaimWaiters({ databaseUrl: 'postgres://unused', listener: listener as unknown as ReadyListener, perAgent: 4, max: 100 });
    const since = await whole.mark();
    const alone = Array.from({ length: 5 }, (_, i) => whole.wait({ agentId: `b${i}` }, SHELL, since, 400));
    await settled();
    listener.roster = { members: 3, rank: 1 };
    listener.hint(payload(4, 2));
    expect(await woken(alone)).toBe(4);
    await whole.close();
  });

  it('given no part of a single task, it looks again after its turn and wakes one waiter while the group is still READY', async () => {
    const roster = { members: 3, rank: 2 };
    let ready = true;
    const { listener, waiters, probes, waitFor } = setup(roster, () => ready);
    const { ends } = await waitFor(3);
    const p = payloadWith(1, roster, (part) => part === 0);
    const heardAt = Date.now();
    listener.hint(p);
    const first = await Promise.race(ends);
    expect(first.woken).toBe(true);
    expect(Date.now() - heardAt).toBeGreaterThanOrEqual(CLAIM_WAIT_DEFAULTS.shareLookAgainMs - 5);
    expect(probes).toEqual(['shell']);
    // Taken elsewhere by the time it looks: no waiter wakes, only the probe ran.
    ready = false;
    const { ends: more } = await waitFor(2);
    listener.hint(payloadWith(1, roster, (part) => part === 0));
    await new Promise((r) => setTimeout(r, CLAIM_WAIT_DEFAULTS.shareLookAgainMs * 3 + 50));
    expect(probes).toEqual(['shell', 'shell']);
    await waiters.close();
    expect(await woken(more)).toBe(0);
    expect(await woken(ends)).toBe(1);
  });

  it('a part no waiter took is owed to the claims running when it came, and only that many re-claim', async () => {
    const roster = { members: 2, rank: 1 };
    const { listener, waiters } = setup(roster, () => true);
    // Three claims start (their mark taken), and are still running when a hint of 2 tasks comes: this process's part is 1.
    const since = await waiters.mark();
    listener.hint(payloadWith(2, roster, (part) => part === 1));
    const ends = ['r0', 'r1', 'r2'].map((id) => waiters.wait({ agentId: id }, SHELL, since, 300));
    expect((await Promise.all(ends)).map((e) => e.woken)).toEqual([true, false, false]);
    await waiters.close();
  });

  it('a part given to no waiter here, when nothing waits, costs no probe and is owed to the running claims', async () => {
    const roster = { members: 2, rank: 0 };
    const { listener, waiters, probes } = setup(roster, () => true);
    const since = await waiters.mark();
    listener.hint(payloadWith(1, roster, (part) => part === 0));
    await new Promise((r) => setTimeout(r, CLAIM_WAIT_DEFAULTS.shareLookAgainMs * 2 + 50));
    expect(probes).toEqual([]);
    const end = await waiters.wait({ agentId: 'late' }, SHELL, since, 300);
    expect(end.woken).toBe(true);
    await waiters.close();
  });

  it('a node that noted nothing READY keeps trusting it while each shared hint went to woken claims, and not once one is owed', async () => {
    const roster = { members: 2, rank: 0 };
    const { listener, waiters, waitFor } = setup(roster, () => true);
    waiters.noteNothingReady(SHELL, await waiters.mark());
    expect(waiters.nothingReadyFor(SHELL)).toBe(true);
    // A hint whose part here woke a waiting claim: that claim takes it, so an agent coming in need not claim first.
    const { ends } = await waitFor(1);
    listener.hint(payloadWith(2, roster, (part) => part === 1));
    expect(await woken(ends)).toBe(1);
    expect(waiters.nothingReadyFor(SHELL)).toBe(true);
    // A part no waiter took is owed: the next agent coming in claims.
    listener.hint(payloadWith(2, roster, (part) => part === 1));
    expect(waiters.nothingReadyFor(SHELL)).toBe(false);
    await waiters.close();
  });

  it('a hint given to another process keeps the trust while looking again finds it taken, and ends it when no waiter here could look', async () => {
    const roster = { members: 2, rank: 0 };
    const { listener, waiters, probes, waitFor } = setup(roster, () => false);
    waiters.noteNothingReady(SHELL, await waiters.mark());
    const { ends } = await waitFor(1);
    listener.hint(payloadWith(1, roster, (part) => part === 0));
    await new Promise((r) => setTimeout(r, CLAIM_WAIT_DEFAULTS.shareLookAgainMs * 2 + 50));
    // The waiter here looked (one probe): taken elsewhere, nothing owed.
    expect(probes).toHaveLength(1);
    expect(waiters.nothingReadyFor(SHELL)).toBe(true);
    expect(await woken(ends)).toBe(0);
    // No waiter here now: looking again costs no probe, and owes the hint to whoever comes in next.
    listener.hint(payloadWith(1, roster, (part) => part === 0));
    await new Promise((r) => setTimeout(r, CLAIM_WAIT_DEFAULTS.shareLookAgainMs * 2 + 50));
    expect(probes).toHaveLength(1);
    expect(waiters.nothingReadyFor(SHELL)).toBe(false);
    await waiters.close();
  });

  it('alone on the roster, any hint it may take ends the trust, as before', async () => {
    const { listener, waiters, waitFor } = setup({ members: 1, rank: 0 }, () => true);
    waiters.noteNothingReady(SHELL, await waiters.mark());
    const { ends } = await waitFor(1);
    listener.hint(payload(1, 9));
    expect(await woken(ends)).toBe(1);
    expect(waiters.nothingReadyFor(SHELL)).toBe(false);
    await waiters.close();
  });

  it(`with many processes given no part, those past the ${CLAIM_WAIT_DEFAULTS.shareLookAgainTurnsMax}th turn look together, not one after another`, async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const roster = { members: 10, rank: 0 };
      const { listener, waiters, probes, waitFor } = setup(roster, () => true);
      const { ends } = await waitFor(1);
      // A single task whose turn here would be the 9th.
      listener.hint(payloadWith(1, roster, (part, p) => part === 0 && hintTurn(1, roster, p) === 9));
      const turns = CLAIM_WAIT_DEFAULTS.shareLookAgainTurnsMax;
      await vi.advanceTimersByTimeAsync(turns * CLAIM_WAIT_DEFAULTS.shareLookAgainMs - 1);
      expect(probes).toEqual([]);
      await vi.advanceTimersByTimeAsync(1);
      expect(probes).toEqual(['shell']);
      expect((await ends[0])!.woken).toBe(true);
      await waiters.close();
    } finally {
      vi.useRealTimers();
    }
  });
});
