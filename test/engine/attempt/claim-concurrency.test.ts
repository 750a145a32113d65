import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../../src/db/open.js';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskCompleteMany } from '../../../src/engine/attempt/complete.js';
import { dagSubmit } from '../../../src/engine/dag/submit.js';
import type { DagSpec } from '../../../src/dag/spec.js';
import { TASK_DEFAULTS } from '../../../src/dag/spec.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate } from '../../helpers/factories.js';

const database = await testDatabase();
const { db } = database;

function flatDag(name: string, n: number): DagSpec {
  return {
    name, params: {},
    tasks: Array.from({ length: n }, (_, i) => ({
      key: `t${i}`, type: 'noop', body: { context: [], models: [], fallbackModels: [], input: {} },
      requiredCapabilities: [], priority: i % 100, boostPerMinute: 0, dependsOn: [], maxAttempts: 3,
      retry: { ...TASK_DEFAULTS.retry }, tags: [],
    })),
  };
}

describe('claiming under concurrency', () => {
  it('20 claimers on separate connections claim each of 2,000 READY tasks exactly once', async () => {
    await dagSubmit(db, [flatDag('flat', 2000)]);
    const claimers = await Promise.all(Array.from({ length: 20 }, async (_, i) => {
      const conn = await databaseOpen({ url: database.url, migrate: false, poolSize: 1 });
      return { conn, agentId: await agentCreate(db, `claimer-${i}`) };
    }));
    const claimedBy = new Map<string, string[]>();
    await Promise.all(claimers.map(async ({ conn, agentId }) => {
      for (;;) {
        const batch = await taskClaim(conn.db, agentId, { limit: 7 });
        if (batch.length === 0) return;
        for (const t of batch) claimedBy.set(t.id, [...(claimedBy.get(t.id) ?? []), agentId]);
        const r = await taskCompleteMany(conn.db, batch.map((t) => ({ taskId: t.id, fence: t.fence, output: { agentId } })));
        expect(r.refused).toEqual([]);
      }
    }));
    await Promise.all(claimers.map((c) => c.conn.close()));

    expect(claimedBy.size).toBe(2000);
    expect([...claimedBy.values()].every((agents) => agents.length === 1)).toBe(true);
    const busy = new Set([...claimedBy.values()].map((a) => a[0]));
    expect(busy.size).toBeGreaterThan(1);
    const { rows } = await db.execute<{ status: string; n: number }>(sql`select status, count(*)::int as n from tasks group by status`);
    expect(rows).toEqual([{ status: 'completed', n: 2000 }]);
    const att = await db.execute<{ n: number; tasks: number }>(sql`select count(*)::int as n, count(distinct task_id)::int as tasks from attempts where outcome = 'completed'`);
    expect(att.rows[0]).toEqual({ n: 2000, tasks: 2000 });
  });

  it('claims in priority order, then age, and never more than the limit', async () => {
    await db.execute(sql`delete from tasks`);
    const spec = flatDag('ordered', 30);
    spec.tasks.forEach((t, i) => (t.priority = 90 - i));
    await dagSubmit(db, [spec]);
    const agentId = await agentCreate(db, 'order-1');
    const first = await taskClaim(db, agentId, { limit: 5 });
    expect(first.map((t) => t.key)).toEqual(['t29', 't28', 't27', 't26', 't25']);
  });

  it('only claims tasks whose capabilities the agent has and whose cost fits its budget', async () => {
    const spec = flatDag('caps', 4);
    spec.tasks[0]!.requiredCapabilities = ['gpu'];
    spec.tasks[1]!.requiredCapabilities = ['gpu', 'shell'];
    spec.tasks[2]!.maxCostUsd = 5;
    spec.tasks[3]!.maxCostUsd = 0.5;
    spec.tasks.forEach((t) => (t.priority = 0));
    const [submitted] = await dagSubmit(db, [spec]);
    const dagId = submitted!.dagId;
    const gpuOnly = await agentCreate(db, 'gpu-only', ['gpu'], 1);
    const claimed = await taskClaim(db, gpuOnly, { limit: 100 });
    const keys = claimed.filter((t) => t.dagId === dagId).map((t) => t.key).sort();
    expect(keys).toEqual(['t0', 't3']);
  });
});

describe('the claim\'s prepared statement', () => {
  it('a session that lost its prepared statements (DEALLOCATE ALL, as a pooler\'s reset does) claims on: it prepares again', async () => {
    const d = await databaseOpen({ url: database.url, migrate: false, poolSize: 1 });
    try {
      await agentCreate(d.db, 'reset-victim');
      const spec: DagSpec = { name: 'reset', params: {}, tasks: ['a', 'b'].map((key) => ({
        key, type: 't', body: { context: [], models: [], fallbackModels: [], input: {} }, requiredCapabilities: [], priority: 50,
        boostPerMinute: 0, dependsOn: [], maxAttempts: 3, retry: { ...TASK_DEFAULTS.retry }, tags: [],
      })) };
      const [submitted] = await dagSubmit(d.db, [spec]);
      const dagId = submitted!.dagId;
      const first = await taskClaim(d.db, 'reset-victim', { dagId });
      expect(first).toHaveLength(1);
      const before = (await d.db.execute<{ n: number }>(sql`select count(*)::int as n from pg_prepared_statements`)).rows[0]!.n;
      expect(before).toBeGreaterThan(0);
      await d.db.execute(sql`deallocate all`);
      const second = await taskClaim(d.db, 'reset-victim', { dagId });
      expect([...first, ...second].map((t) => t.key).sort()).toEqual(['a', 'b']);
    } finally {
      await d.close();
    }
  });
});
