import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { withTx } from '../../src/db/tx.js';
import type { HandOff } from '../../src/db/rows.js';
import { priorityConfigure } from '../../src/model/priority.js';
import { queryCompile, queryFill } from '../../src/db/statement.js';
import { claimCompiled, taskClaimReady, taskClaimReadySql } from '../../src/db/queries/tasks-claim.js';
import { taskCompleteMark, taskCompleteMarkCompiled, taskCompleteMarkSql } from '../../src/db/queries/tasks-complete.js';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, rowsOf } from '../helpers/factories.js';

const { db } = await testDatabase();
const dialect = new PgDialect();

// The claim and the completion are compiled once per shape and filled per call (statement.ts queryCompile). The bench
// EXPLAINs the statements built with their values (taskClaimReadySql, taskCompleteMarkSql): both must be one statement.
describe('statements compiled once per shape', () => {
  beforeEach(() => databaseReset(db));

  it('fill in to the same text and parameters as the statement built with its values, for every shape', () => {
    const grants = [undefined, { maxHeld: 3, budgetUsd: null }, { maxHeld: null, budgetUsd: 1.5 }];
    for (const keyed of [false, true]) for (const start of [false, true]) for (const grant of grants) for (const dagId of [undefined, 'dag-1']) {
      const opts = { keyed, start, grant, dagId };
      const built = dialect.sqlToQuery(taskClaimReadySql('agent-1', ['a', 'b'], 7, 45, opts));
      const filled = queryFill(claimCompiled(opts), { agentId: 'agent-1', caps: ['a', 'b'], limit: 7, claimTtlSec: 45, budgetUsd: grant?.budgetUsd ?? null, maxHeld: grant?.maxHeld ?? null, dagId: dagId ?? null });
      expect(filled.sql).toBe(built.sql);
      expect(filled.params).toEqual(built.params);
    }
    const items = [{ id: 't1', fence: 2, output: { a: 1 } }, { id: 't2', fence: 1, output: null, costUsd: 0.25, model: 'm' }];
    const hands = [undefined, { agentId: 'agent-1', capabilities: ['a'], max: 2, start: false, claimTtlSec: 60 }, { agentId: 'agent-2', capabilities: [], max: 1, start: true, claimTtlSec: 30 }];
    for (const checked of [false, true]) for (const handTo of hands) {
      const built = dialect.sqlToQuery(taskCompleteMarkSql(items, { checked, handTo }));
      const filled = taskCompleteMarkCompiled(items, { checked, handTo });
      expect(filled.sql).toBe(built.sql);
      expect(filled.params).toEqual(built.params);
    }
  });

  it('take their shape from the options as the text reads them: a truthy start that is not true is start', () => {
    const truthy = { start: 'yes' } as unknown as { start: boolean };
    expect(claimCompiled(truthy).sql).toBe(claimCompiled({ start: true }).sql);
    expect(claimCompiled({}).sql).not.toBe(claimCompiled({ start: true }).sql);
    const checked = { checked: 1 } as unknown as { checked: boolean };
    const items = [{ id: 't1', fence: 1, output: null }];
    expect(taskCompleteMarkCompiled(items, checked).sql).toBe(taskCompleteMarkCompiled(items, { checked: true }).sql);
    expect(taskCompleteMarkCompiled(items, {}).sql).not.toBe(taskCompleteMarkCompiled(items, { checked: true }).sql);
  });

  it('write the priority constants in force: a completion compiled before they changed is compiled again', () => {
    const items = [{ id: 't1', fence: 2, output: null }];
    const handTo = { agentId: 'agent-1', capabilities: [], max: 1, start: true, claimTtlSec: 60 };
    const before = taskCompleteMarkCompiled(items, { handTo });
    const previous = priorityConfigure({ cpMax: 7, cpScaleSec: 11 });
    try {
      const filled = taskCompleteMarkCompiled(items, { handTo });
      expect(filled.params).toEqual(dialect.sqlToQuery(taskCompleteMarkSql(items, { handTo })).params);
      expect(filled.params).not.toEqual(before.params);
      expect(filled.params).toContain(11);
    } finally {
      priorityConfigure(previous);
    }
    expect(taskCompleteMarkCompiled(items, { handTo }).params).toEqual(before.params);
  });

  it('refuses to run with a placeholder left without a value', () => {
    const c = queryCompile(sql`select ${sql.placeholder('a')}::int + ${sql.placeholder('b')}::int as n`);
    expect(() => queryFill(c, { a: 1 })).toThrow(/placeholder b/);
    expect(() => queryFill(c, { a: 1, b: undefined })).toThrow(/placeholder b/);
    expect(queryFill(c, { a: 1, b: null }).params).toEqual([1, null]);
    // From JavaScript, a hand-off without its max or claim TTL is refused, not run with NULL (no cap, a lease that never expires).
    const partial = { agentId: 'agent-1', capabilities: [], start: false } as unknown as HandOff;
    expect(() => taskCompleteMarkCompiled([{ id: 't1', fence: 1, output: null }], { handTo: partial })).toThrow(/placeholder max/);
    // Run in a caller's transaction, the text is read back into parameters by its `$n`: one of its own is refused.
    expect(() => queryCompile(sql`select jsonb_path_query(${sql.placeholder('doc')}::jsonb, '$.a')`)).toThrow(/no \$ but its parameters/);
  });

  it('run filled inside a caller\'s transaction, as on the pool: a claim and a completion that hands the dependent on', async () => {
    const agent = await agentCreate(db, 'compiled-tx');
    const dagId = await dagCreate(db, 'name: pair\ntasks:\n  up: { type: t }\n  down: { type: t, depends_on: [up] }\n');
    await withTx(db, async (tx) => {
      const { rows } = await taskClaimReady(tx, agent, [], 5, 60, { dagId, start: true });
      expect(rows.map((r) => r.key)).toEqual(['up']);
      const r = await taskCompleteMark(tx, [{ id: rows[0]!.id, fence: rows[0]!.fence, output: { n: 1 } }], {
        handTo: { agentId: agent, capabilities: [], max: 1, start: true, claimTtlSec: 60 },
      });
      expect(r.completed).toEqual([rows[0]!.id]);
      expect(r.handed.map((h) => h.key)).toEqual(['down']);
    });
    const states = await rowsOf<{ key: string; status: string; claimed_by: string | null }>(db, sql`
      select key, status, claimed_by from tasks where dag_id = ${dagId} order by key`);
    expect(states).toEqual([{ key: 'down', status: 'running', claimed_by: agent }, { key: 'up', status: 'completed', claimed_by: agent }]);
  });
});
