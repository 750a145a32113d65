import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../../src/db/open.js';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskFail } from '../../../src/engine/attempt/fail.js';
import { taskComplete, taskCompleteMany } from '../../../src/engine/attempt/complete.js';
import { taskRelease } from '../../../src/engine/attempt/release.js';
import { taskSpawn } from '../../../src/engine/dag/spawn.js';
import { rateLimitList, rateLimitRemove, rateLimitSet } from '../../../src/engine/ops/rate-limits.js';
import { rateUsageCreate } from '../../../src/maintenance/rate-usage.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, databaseSnapshot, rowsOf } from '../../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
beforeEach(() => databaseReset(db));

const tasksYaml = (name: string, n: number, body: string) =>
  `name: ${name}\ntasks:\n${Array.from({ length: n }, (_, i) => `  t${i}: { type: w, priority: ${i}, ${body} }`).join('\n')}\n`;
/** Move every usage row back in time, as if `sec` seconds had passed. */
const age = (sec: number) => db.execute(sql`update rate_usage set at = at - make_interval(secs => ${sec})`);

describe('declared rate limits', () => {
  it('admits no more requests per window than the limit; the rest wait READY while tasks on other models run', async () => {
    await rateLimitSet(db, 'acme/fast', { requests: 2, per: '10s' });
    await dagCreate(db, tasksYaml('limited', 5, 'spec: { models: [acme/fast] }'));
    await dagCreate(db, 'name: free\ntasks:\n  other: { type: w, priority: 90, spec: { models: [acme/slow] } }\n  plain: { type: w, priority: 90 }\n');
    await agentCreate(db, 'w', [], undefined, { models: ['acme/fast', 'acme/slow'] });

    const first = await taskClaim(db, 'w', { limit: 10 });
    expect(first.map((t) => `${t.key}:${t.model}`).sort()).toEqual(['other:acme/slow', 'plain:null', 't0:acme/fast', 't1:acme/fast']);
    expect(await taskClaim(db, 'w', { limit: 10 })).toEqual([]);
    const [row] = await rateLimitList(db);
    expect(row).toMatchObject({ key: 'acme/fast', requests: 2, windowSec: 10, requestsUsed: 2 });

    // Completing frees nothing: the window does. Ten seconds on, two more.
    await taskCompleteMany(db, first.map((t) => ({ taskId: t.id, fence: t.fence, output: {} })));
    expect(await taskClaim(db, 'w', { limit: 10 })).toEqual([]);
    await age(10);
    expect((await taskClaim(db, 'w', { limit: 10 })).map((t) => t.key)).toEqual(['t2', 't3']);
  });

  it('a task that accepts another model runs on it while its first is at the limit; a provider\'s limit covers all its models', async () => {
    await rateLimitSet(db, 'acme/fast', { requests: 1 });
    await rateLimitSet(db, 'other', { requests: 2 });
    await dagCreate(db, tasksYaml('both', 4, 'spec: { models: [acme/fast, other/a, other/b] }'));
    await agentCreate(db, 'w', [], undefined, { models: ['*'] });
    // One on acme/fast; the others chose acme/fast too, as this claim began, and wait for the next claim.
    expect((await taskClaim(db, 'w', { limit: 10 })).map((t) => t.model)).toEqual(['acme/fast']);
    // acme/fast is spent: the next claim hands out the next model, and the provider "other" allows two of any of its models.
    const got = await taskClaim(db, 'w', { limit: 10 });
    expect(got.map((t) => t.model)).toEqual(['other/a', 'other/a']);
    expect(got[0]!.models).toEqual(['other/a', 'other/b']);
    expect(await taskClaim(db, 'w', { limit: 10 })).toEqual([]);
    const usage = await rowsOf<{ key: string; n: number }>(db, sql`select key, count(*)::int as n from rate_usage group by key order by key`);
    expect(usage).toEqual([{ key: 'acme/fast', n: 1 }, { key: 'other', n: 2 }]);
  });

  it('reserves estimated tokens at claim and counts the tokens the attempt reported instead once it ends', async () => {
    await rateLimitSet(db, 'm', { tokens: '1k', default_tokens: 100 });
    await dagCreate(db, tasksYaml('tokens', 6, 'spec: { models: [m], constraints: { estimated_tokens: 400 } }'));
    await dagCreate(db, 'name: small\ntasks:\n  s: { type: w, priority: 99, spec: { models: [m] } }\n');
    await agentCreate(db, 'w', [], undefined, { models: ['m'] });

    const first = await taskClaim(db, 'w', { limit: 10 });
    // 400 + 400 fit in 1,000; the next 400 does not, and it holds back what queues behind it on this limit (s,
    // whose 100 would fit): a large task is never starved by a stream of small ones.
    expect(first.map((t) => t.key)).toEqual(['t0', 't1']);
    expect(await taskClaim(db, 'w', { limit: 10 })).toEqual([]);
    expect((await rateLimitList(db))[0]).toMatchObject({ requestsUsed: 2, tokensUsed: 800 });
    // t0 used 50 tokens: its 400 become 50, and 550 are free, room for t2 (400) but not t3 behind it.
    await taskComplete(db, { taskId: first[0]!.id, fence: first[0]!.fence, output: {}, tokensIn: 30, tokensOut: 20 });
    expect((await rateLimitList(db))[0]!.tokensUsed).toBe(450);
    expect((await taskClaim(db, 'w', { limit: 10 })).map((t) => t.key)).toEqual(['t2']);
  });

  it('a task estimated above the whole tokens limit runs alone in an empty window, never beside others', async () => {
    await rateLimitSet(db, 'm', { tokens: 1000 });
    await dagCreate(db, 'name: big\ntasks:\n  huge: { type: w, priority: 1, spec: { models: [m], constraints: { estimated_tokens: 5000 } } }\n  next: { type: w, priority: 2, spec: { models: [m], constraints: { estimated_tokens: 10 } } }\n');
    await agentCreate(db, 'w', [], undefined, { models: ['m'] });
    expect((await taskClaim(db, 'w', { limit: 10 })).map((t) => t.key)).toEqual(['huge']);
    expect(await taskClaim(db, 'w', { limit: 10 })).toEqual([]);
  });

  it('a 429 on a model whose only declared limit is its provider\'s pauses the provider for the fleet', async () => {
    await rateLimitSet(db, 'acme', { requests: 100 });
    await dagCreate(db, tasksYaml('p', 3, 'max_attempts: 3, spec: { models: [acme/a, acme/b, zeta/c] }'));
    await agentCreate(db, 'w', [], undefined, { models: ['*'] });
    const [t] = await taskClaim(db, 'w');
    expect(t!.model).toBe('acme/a');
    await taskFail(db, { taskId: t!.id, fence: t!.fence, errorClass: 'rate_limit', message: '429', retryAfterSec: 60, model: 'acme/a' });
    const [pause] = await rowsOf<{ model: string }>(db, sql`select model from model_pauses`);
    expect(pause!.model).toBe('acme');
    // Neither acme model is handed out while the provider is paused.
    expect((await taskClaim(db, 'w', { limit: 5 })).map((c) => c.model)).toEqual(['zeta/c', 'zeta/c']);
  });

  it('refuses a bad limit, naming the field, and changes nothing', async () => {
    await rateLimitSet(db, 'm', { requests: 5 });
    const before = await databaseSnapshot(db);
    await expect(rateLimitSet(db, 'bad key', { requests: 1 })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: expect.stringMatching(/^key: must be a model/) });
    await expect(rateLimitSet(db, 'm', {})).rejects.toMatchObject({ code: 'INVALID_INPUT', message: expect.stringContaining('set requests, tokens or both') });
    await expect(rateLimitSet(db, 'm', { requests: 'lots' })).rejects.toMatchObject({ message: expect.stringMatching(/^requests: /) });
    await expect(rateLimitSet(db, 'm', { requests: 1, per: '2h' })).rejects.toMatchObject({ message: expect.stringMatching(/^per: must be whole seconds/) });
    await expect(rateLimitSet(db, 'm', { tokens: 5, per: 'abc' })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: expect.stringMatching(/^per: must be a duration/) });
    await expect(rateLimitSet(db, 'm', { requests: '0.4' })).rejects.toMatchObject({ message: 'requests: must be at least 1' });
    await expect(rateLimitSet(db, 'm', {})).rejects.toMatchObject({ message: 'set requests, tokens or both' });
    await expect(rateLimitSet(db, 'm', { requests: 1, rpm: 3 })).rejects.toMatchObject({ message: expect.stringContaining('rpm') });
    await expect(rateLimitRemove(db, 'nope')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await databaseSnapshot(db)).toBe(before);
  });

  it('what a window held still counts when the window is made longer or the limit declared again; the loop prunes only rows older than an hour', async () => {
    await rateLimitSet(db, 'm', { requests: 2, per: '10s' });
    await dagCreate(db, tasksYaml('u', 6, 'spec: { models: [m] }'));
    await agentCreate(db, 'w', [], undefined, { models: ['m'] });
    expect(await taskClaim(db, 'w', { limit: 5 })).toHaveLength(2);
    await age(15);
    const loop = rateUsageCreate({ db });
    await loop.runOnce();
    expect(await rowsOf(db, sql`select key from rate_usage`)).toHaveLength(2);
    // Now 2 per minute: the two claims of 15 s ago are still in the window.
    await rateLimitSet(db, 'm', { requests: 2, per: '1m' });
    expect(await taskClaim(db, 'w', { limit: 5 })).toEqual([]);
    // Removed and declared again: the same.
    await rateLimitRemove(db, 'm');
    await loop.runOnce();
    await rateLimitSet(db, 'm', { requests: 2, per: '1m' });
    expect(await taskClaim(db, 'w', { limit: 5 })).toEqual([]);
    await age(3600);
    await loop.runOnce();
    expect(await rowsOf(db, sql`select key from rate_usage`)).toEqual([]);
  });

  it('a claim handed back (released, or its start lapsed) gives its reservation back: claiming and releasing cannot fill a window', async () => {
    await rateLimitSet(db, 'm', { requests: 3 });
    await dagCreate(db, tasksYaml('r', 4, 'spec: { models: [m] }'));
    await agentCreate(db, 'looper', [], undefined, { models: ['m'], maxConcurrent: 1 });
    for (let i = 0; i < 10; i++) {
      const [t] = await taskClaim(db, 'looper');
      expect(t, `claim ${i}`).toBeDefined();
      await taskRelease(db, { taskId: t!.id, fence: t!.fence });
    }
    expect((await rateLimitList(db))[0]!.requestsUsed).toBe(0);
    await agentCreate(db, 'honest', [], undefined, { models: ['m'] });
    expect(await taskClaim(db, 'honest', { limit: 5 })).toHaveLength(3);
  });

  it('an agent cannot set the estimate of a subtask it writes (its parent\'s is reserved), and a report of a billion tokens counts as the whole window at most', async () => {
    await rateLimitSet(db, 'm', { tokens: 10_000 });
    await dagCreate(db, 'name: p\ntasks:\n  parent: { type: w, spec: { models: [m], constraints: { estimated_tokens: 1500 } } }\n  other: { type: w, priority: 90, spec: { models: [m] } }\n');
    await agentCreate(db, 'w', [], undefined, { models: ['m'] });
    const [parent] = await taskClaim(db, 'w');
    await expect(taskSpawn(db, { taskId: parent!.id, fence: parent!.fence }, [{ key: 'greedy', type: 'w', spec: { constraints: { estimated_tokens: 2_000_000_000 } } }]))
      .rejects.toMatchObject({ code: 'FORBIDDEN', message: expect.stringContaining('spec.constraints.estimated_tokens: an agent cannot choose') });
    await taskSpawn(db, { taskId: parent!.id, fence: parent!.fence }, [{ key: 'child', type: 'w' }]);
    const [child] = await taskClaim(db, 'w');
    expect(child!.key).toBe('parent/child');
    const reserved = await rowsOf<{ tokens_reserved: number }>(db, sql`select tokens_reserved from rate_usage where task_id = ${child!.id}`);
    expect(reserved).toEqual([{ tokens_reserved: 1500 }]);
    await taskComplete(db, { taskId: child!.id, fence: child!.fence, output: {}, tokensIn: 1_000_000_000 });
    const [used] = await rowsOf<{ tokens_used: number }>(db, sql`select tokens_used from rate_usage where task_id = ${child!.id}`);
    expect(used!.tokens_used).toBe(10_000);
  });

  it('many agents racing on real connections never exceed the limit in any window (attempts timestamps)', async () => {
    const windowSec = 1;
    const perWindow = 6;
    await rateLimitSet(db, 'shared/model', { requests: perWindow, tokens: 6000, per: `${windowSec}s`, default_tokens: 700 });
    await dagCreate(db, tasksYaml('race', 40, 'spec: { models: [shared/model] }'));
    const conns = await Promise.all(Array.from({ length: 10 }, () => databaseOpen({ url: database.url, migrate: false, poolSize: 1 })));
    try {
      await Promise.all(conns.map(async (c, i) => {
        const agentId = await agentCreate(db, `racer-${i}`, [], undefined, { models: ['shared/model'] });
        for (;;) {
          const [open] = await rowsOf<{ n: number }>(c.db, sql`select count(*)::int as n from tasks where status <> 'completed'`);
          if (open!.n === 0) return;
          const got = await taskClaim(c.db, agentId, { limit: 2 });
          if (got.length === 0) { await new Promise((r) => setTimeout(r, 20)); continue; }
          const r = await taskCompleteMany(c.db, got.map((t) => ({ taskId: t.id, fence: t.fence, output: {}, tokensIn: 100, tokensOut: 100 })));
          expect(r.refused).toEqual([]);
        }
      }));
      // Any window of windowSec holds at most perWindow attempts, by the attempts' claim times (started_at) and,
      // exactly, by the reservations' own times; tokens: 700 reserved until the report makes it 200.
      const most = async (table: 'attempts' | 'rate_usage', column: string, slackMs: number) => (await rowsOf<{ most: number }>(db, sql.raw(`
        select max((select count(*) from ${table} b where b.${column} >= a.${column} and b.${column} < a.${column} + interval '${windowSec * 1000 - slackMs} milliseconds'))::int as most
        from ${table} a`)))[0]!.most;
      expect(await most('rate_usage', 'at', 0)).toBeLessThanOrEqual(perWindow);
      expect(await most('attempts', 'started_at', 1)).toBeLessThanOrEqual(perWindow);
      expect(await most('attempts', 'started_at', 1)).toBe(perWindow); // the limit was reached, not avoided
      const [n] = await rowsOf<{ n: number; distinct_agents: number }>(db, sql`select count(*)::int as n, count(distinct agent_id)::int as distinct_agents from attempts`);
      expect(n).toEqual({ n: 40, distinct_agents: expect.any(Number) });
      expect(n!.distinct_agents).toBeGreaterThan(1);
      expect(await rowsOf(db, sql`select distinct tokens_used from rate_usage`)).toEqual([{ tokens_used: 200 }]);
    } finally {
      await Promise.all(conns.map((c) => c.close()));
    }
  });
});
