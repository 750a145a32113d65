import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../../src/db/open.js';
import { taskClaim, type ClaimedTask } from '../../../src/engine/attempt/claim.js';
import { taskCancel } from '../../../src/engine/dag/cancel.js';
import { taskComplete, taskCompleteMany } from '../../../src/engine/attempt/complete.js';
import { taskRelease } from '../../../src/engine/attempt/release.js';
import { taskFail } from '../../../src/engine/attempt/fail.js';
import { taskSpawn } from '../../../src/engine/dag/spawn.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, rowsOf } from '../../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
beforeEach(() => databaseReset(db));

const keys = (claimed: ClaimedTask[]) => claimed.map((t) => t.key).sort();

describe('concurrency keys', () => {
  it('no more than the limit of a key\'s tasks are claimed or running, across DAGs; the others wait without holding up other work', async () => {
    const repoDag = (name: string) => `
name: ${name}
params: { repo: { required: true } }
defaults: { concurrency: { key: "repo:\${params.repo}", limit: 2 } }
tasks:
${[0, 1, 2].map((i) => `  edit${i}: { type: w, priority: ${10 + i} }`).join('\n')}
  docs: { type: w, priority: 60, concurrency: { key: "docs", limit: 5 } }
`;
    await dagCreate(db, repoDag('first'), { repo: 'acme/api' });
    await dagCreate(db, repoDag('second'), { repo: 'acme/api' });
    await dagCreate(db, 'name: free\ntasks:\n  a: { type: w, priority: 90 }\n  b: { type: w, priority: 90 }\n');
    await agentCreate(db, 'worker');

    const first = await taskClaim(db, 'worker', { limit: 10 });
    // Two edits (the most urgent, whichever DAG), and the rest of the queue: nothing waits behind the key.
    expect(first.filter((t) => t.key.startsWith('edit'))).toHaveLength(2);
    expect(keys(first.filter((t) => !t.key.startsWith('edit')))).toEqual(['a', 'b', 'docs', 'docs']);
    expect(await taskClaim(db, 'worker', { limit: 10 })).toEqual([]);

    const [done] = first.filter((t) => t.key.startsWith('edit'));
    await taskComplete(db, { taskId: done!.id, fence: done!.fence, output: {} });
    const next = await taskClaim(db, 'worker', { limit: 10 });
    expect(next.map((t) => t.key.slice(0, 4))).toEqual(['edit']);
    const [row] = await rowsOf<{ held: number; lim: number }>(db, sql`select held - (select count(*) from concurrency_releases r where r.key = k.key)::int as held, lim from concurrency_keys k where key = 'repo:acme/api'`);
    expect(row).toEqual({ held: 2, lim: 2 });
  });

  it('every way out of claimed or running gives the key back: failure, release, cancel, validation, waiting for subtasks', async () => {
    await dagCreate(db, `
name: one-at-a-time
concurrency: { key: only-one, limit: 1 }
tasks:
${Array.from({ length: 6 }, (_, i) => `  t${i}: { type: w, priority: ${i}, max_attempts: 5${i === 3 ? ', output: { validation: { kind: llm-judge, rubric: "ok?", threshold: 0.5 } }' : ''} }`).join('\n')}
`);
    await agentCreate(db, 'solo');
    const one = async () => {
      const got = await taskClaim(db, 'solo', { limit: 5 });
      expect(got).toHaveLength(1);
      return got[0]!;
    };
    let t = await one();
    expect(t.key).toBe('t0');
    await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'transient', message: 'again' }); // retrying: not held
    t = await one();
    await taskRelease(db, { taskId: t.id, fence: t.fence });
    t = await one();
    await taskCancel(db, t.id);
    t = await one();
    await taskSpawn(db, { taskId: t.id, fence: t.fence }, [{ key: 'sub', type: 'w' }], { wait: true }); // the parent waits: not held
    t = await one();
    expect(t.key).toBe('t2/sub');
    // The free-form subtask shares its parent's key.
    const [sub] = await rowsOf<{ conc_key: string }>(db, sql`select conc_key from tasks where key like '%/sub'`);
    expect(sub!.conc_key).toBe('only-one');
    await taskComplete(db, { taskId: t.id, fence: t.fence, output: {} });
    t = await one();
    while (t.key !== 't3') {
      await taskComplete(db, { taskId: t.id, fence: t.fence, output: {} });
      t = await one();
    }
    const judged = await taskComplete(db, { taskId: t.id, fence: t.fence, output: {} });
    expect(judged.settled).toMatchObject({ status: 'validating' });
    t = await one(); // its output under validation no longer holds the key
    expect(t.key).not.toBe('t3');
  });

  it('many agents racing on three keys never exceed a key\'s limit at any moment (attempts timestamps)', async () => {
    const limits = { k1: 1, k2: 2, k3: 3 } as const;
    for (const [key, limit] of Object.entries(limits)) {
      await dagCreate(db, `
name: race-${key}
concurrency: { key: ${key}, limit: ${limit} }
tasks:
${Array.from({ length: 40 }, (_, i) => `  t${i}: { type: w }`).join('\n')}
`);
    }
    const conns = await Promise.all(Array.from({ length: 8 }, () => databaseOpen({ url: database.url, migrate: false, poolSize: 1 })));
    try {
      await Promise.all(conns.map(async (c, i) => {
        const agentId = await agentCreate(db, `racer-${i}`);
        for (let idle = 0; idle < 200;) {
          const got = await taskClaim(c.db, agentId, { limit: 3 });
          if (got.length === 0) { idle++; continue; }
          const r = await taskCompleteMany(c.db, got.map((t) => ({ taskId: t.id, fence: t.fence, output: {} })));
          expect(r.refused).toEqual([]);
        }
      }));
      const [done] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from tasks where status = 'completed'`);
      expect(done!.n).toBe(120);
      const overlap = await rowsOf<{ key: string; most: number }>(db, sql`
        with a as (select x.started_at, x.ended_at, t.conc_key from attempts x join tasks t on t.id = x.task_id)
        select conc_key as key, max((select count(*) from a b where b.conc_key = a.conc_key and b.started_at <= a.started_at and b.ended_at > a.started_at))::int as most
        from a group by conc_key order by conc_key`);
      for (const { key, most } of overlap) expect(most, key).toBeLessThanOrEqual(limits[key as keyof typeof limits]);
      expect(overlap.find((o) => o.key === 'k3')!.most).toBeGreaterThan(1); // the agents did overlap
    } finally {
      await Promise.all(conns.map((c) => c.close()));
    }
  });
});
