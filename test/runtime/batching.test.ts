import { beforeEach, describe, expect, it } from 'vitest';
import { ClaimBuffer } from '../bench/claim-buffer.js';
import { COMPLETION_BATCHER_DEFAULTS, CompletionBatcher } from '../../src/runtime/completion-batcher.js';
import { databaseOpen } from '../../src/db/open.js';
import { openOptionsLike, testDatabase } from '../helpers/db.js';
import { agentCreate, chainYaml, dagCreate, databaseReset, taskStatusByKey } from '../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
beforeEach(() => databaseReset(db));

const flat = (n: number) => `name: flat\ntasks:\n${Array.from({ length: n }, (_, i) => `  t${i}: { type: t }`).join('\n')}\n`;
// A wait that is never woken makes the test time out: that is the failure these tests look for.
const FOREVER = 10 * 60_000;

describe('ClaimBuffer', () => {
  it('holds at most maxHeld tasks, and a settled task lets a waiting taker continue', async () => {
    await dagCreate(db, flat(12));
    const agentId = await agentCreate(db, 'buffer-a');
    const buffer = new ClaimBuffer({ db, agentId, batch: 4, maxHeld: 4 });
    const taken = [];
    for (let i = 0; i < 4; i++) taken.push(await buffer.take());
    expect(taken.every(Boolean)).toBe(true);
    expect(await buffer.take()).toBeUndefined();

    const waiting = buffer.waitForWork(FOREVER);
    buffer.settled();
    await waiting;
    expect(await buffer.take()).toBeDefined();
  });

  it('keeps a wake that arrives while no one waits, so the next wait returns at once', async () => {
    const agentId = await agentCreate(db, 'buffer-b');
    const buffer = new ClaimBuffer({ db, agentId, batch: 2 });
    expect(await buffer.take()).toBeUndefined();
    buffer.wake();
    await buffer.waitForWork(FOREVER);
  });

  it('passes a task that became ready to a taker woken by the completion that unblocked it', async () => {
    const dagId = await dagCreate(db, chainYaml('pair', 2));
    const agentId = await agentCreate(db, 'buffer-c');
    const buffer = new ClaimBuffer({ db, agentId, batch: 2 });
    const batcher = new CompletionBatcher({ db, onUnblocked: () => buffer.wake() });
    const first = (await buffer.take())!;
    expect(first.key).toBe('t0');
    expect(await buffer.take()).toBeUndefined();
    const woken = buffer.waitForWork(FOREVER);
    expect(await batcher.complete({ taskId: first.id, fence: first.fence, output: 1 })).toEqual({ completed: true });
    await woken;
    expect((await buffer.take())?.key).toBe('t1');
    expect((await taskStatusByKey(db, dagId)).t1).toBe('claimed');
  });

  it('gives a waiting taker the tasks a completion hands on without waiting for its claim in flight', async () => {
    const dagId = await dagCreate(db, chainYaml('handed', 2));
    const agentId = await agentCreate(db, 'buffer-d');
    // The buffer claims through a pool of one connection, which the test then occupies: its next claim waits for
    // the connection, in flight as long as the test wants. The completion goes through the file's pool.
    const claimer = await databaseOpen({ ...openOptionsLike(database), migrate: false, poolSize: 1 });
    const buffer = new ClaimBuffer({ db: claimer.db, agentId, batch: 1 });
    const batcher = new CompletionBatcher({
      db, handTo: () => ({ agentId, capabilities: [], max: 1, start: false, claimTtlSec: 60 }), onHanded: (tasks) => buffer.accept(tasks),
    });
    const first = (await buffer.take())!;
    expect(first.key).toBe('t0');
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const occupying = claimer.db.transaction(async () => held);
    try {
      const taking = buffer.take();
      expect(await batcher.complete({ taskId: first.id, fence: first.fence, output: 1 })).toEqual({ completed: true });
      // Answered while the claim still waits for its connection: the task handed on, t1, CLAIMED by the completion.
      expect((await taking)?.key).toBe('t1');
      expect((await taskStatusByKey(db, dagId)).t1).toBe('claimed');
    } finally {
      release();
      await occupying;
      await buffer.take(); // the claim that waited: it finds nothing
      await claimer.close();
    }
  });
});

describe('CompletionBatcher', () => {
  it('writes many completions in batches, reports refusals per task, and drains', async () => {
    await dagCreate(db, flat(250));
    const agentId = await agentCreate(db, 'batcher-a', [], undefined, { maxConcurrent: 250 });
    const buffer = new ClaimBuffer({ db, agentId, batch: 250, maxHeld: 250 });
    const tasks = [];
    for (let t = await buffer.take(); t; t = await buffer.take()) tasks.push(t);
    expect(tasks).toHaveLength(250);

    let flushes = 0;
    const batcher = new CompletionBatcher({ db, maxBatch: 100, onUnblocked: () => flushes++ });
    const outcomes = tasks.map((t, i) => batcher.complete({ taskId: t.id, fence: i === 7 ? t.fence + 1 : t.fence, output: i }));
    await batcher.drain();
    const results = await Promise.all(outcomes);
    expect(results.filter((r) => r.completed)).toHaveLength(249);
    expect(results[7]).toEqual({ completed: false });
    expect(flushes).toBe(0);
  });
});

describe('CompletionBatcher with a bad row', () => {
  it('retries the batch row by row, so only the bad completion fails', async () => {
    await dagCreate(db, flat(3));
    const agentId = await agentCreate(db, 'batcher-bad');
    const { taskClaim } = await import('../../src/engine/attempt/claim.js');
    const [a, b, c] = await taskClaim(db, agentId, { limit: 3 });
    const batcher = new CompletionBatcher({ db });
    // jsonb cannot hold NUL: this row makes the whole statement fail.
    const results = await Promise.allSettled([
      batcher.complete({ taskId: a!.id, fence: a!.fence, output: 'fine' }),
      batcher.complete({ taskId: b!.id, fence: b!.fence, output: 'bad\u0000' }),
      batcher.complete({ taskId: c!.id, fence: c!.fence, output: 'fine too' }),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const statuses = Object.values(await taskStatusByKey(db, a!.dagId)).sort();
    expect(statuses).toEqual(['claimed', 'completed', 'completed']);
  });
});


describe('CompletionBatcher hand-off', () => {
  // Heads of `chains` chains of two, claimed by one agent, then completed together in one batch.
  async function completeHeadsTogether(chains: number) {
    const dagIds = [];
    for (let i = 0; i < chains; i++) dagIds.push(await dagCreate(db, chainYaml(`pair-${i}`, 2)));
    const agentId = await agentCreate(db, `handing-${chains}`, [], undefined, { maxConcurrent: 2 * chains });
    const { taskClaim } = await import('../../src/engine/attempt/claim.js');
    const heads = await taskClaim(db, agentId, { limit: chains });
    expect(heads.map((h) => h.key)).toEqual(Array(chains).fill('t0'));
    const asked: number[] = [];
    const handed: string[] = [];
    const batcher = new CompletionBatcher({
      db,
      handTo: (completing) => { asked.push(completing); return { agentId, capabilities: [], max: completing, start: true, claimTtlSec: 60 }; },
      onHanded: (tasks) => handed.push(...tasks.map((t) => t.id)),
    });
    const outcomes = heads.map((h) => batcher.complete({ taskId: h.id, fence: h.fence, output: 1 }));
    await batcher.drain();
    expect((await Promise.all(outcomes)).every((o) => o.completed)).toBe(true);
    const next = await Promise.all(dagIds.map(async (d) => (await taskStatusByKey(db, d)).t1));
    return { asked, handed, next };
  }

  it('hands the dependents on from a batch of a few completions', async () => {
    const { asked, handed, next } = await completeHeadsTogether(COMPLETION_BATCHER_DEFAULTS.handOffBatchMax);
    expect(asked).toEqual([COMPLETION_BATCHER_DEFAULTS.handOffBatchMax]);
    expect(handed).toHaveLength(COMPLETION_BATCHER_DEFAULTS.handOffBatchMax);
    expect(next.every((s) => s === 'running')).toBe(true);
  });

  it('hands nothing on from a larger batch: its dependents go READY for the claim loop', async () => {
    const { asked, handed, next } = await completeHeadsTogether(COMPLETION_BATCHER_DEFAULTS.handOffBatchMax + 2);
    expect(asked).toEqual([]);
    expect(handed).toEqual([]);
    expect(next.every((s) => s === 'ready')).toBe(true);
  });
});
