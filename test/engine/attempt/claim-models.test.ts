import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../../src/db/open.js';
import { modelsForAgent, taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskComplete, taskCompleteMany } from '../../../src/engine/attempt/complete.js';
import { taskFail } from '../../../src/engine/attempt/fail.js';
import { unclaimableList } from '../../../src/engine/ops/priority.js';
import { dlqEditRetry } from '../../../src/engine/ops/dlq.js';
import { promoterCreate } from '../../../src/maintenance/promoter.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, retryDue, rowsOf } from '../../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
const promoter = promoterCreate({ db });
beforeEach(() => databaseReset(db));

const MODELS_DAG = `
name: models
tasks:
  plain: { type: llm }
  sonnet: { type: llm, spec: { models: [claude-sonnet] } }
  mini: { type: llm, spec: { models: [gpt-4o], fallback_models: [gpt-4o-mini] } }
  nobody: { type: llm, spec: { models: [model-nobody-has] } }
`;

describe('models at claim', () => {
  it('an agent claims only tasks that name none of the models or one it has, and is told which model to use', async () => {
    await dagCreate(db, MODELS_DAG);
    await agentCreate(db, 'no-models', [], undefined, { models: [] });
    await agentCreate(db, 'claude', [], undefined, { models: ['claude-sonnet', 'claude-haiku'] });
    await agentCreate(db, 'small', [], undefined, { models: ['gpt-4o-mini'] });

    const none = await taskClaim(db, 'no-models', { limit: 10 });
    expect(none.map((t) => [t.key, t.model])).toEqual([['plain', null]]);
    const claude = await taskClaim(db, 'claude', { limit: 10 });
    expect(claude.map((t) => [t.key, t.model, t.models])).toEqual([['sonnet', 'claude-sonnet', ['claude-sonnet']]]);
    // A fallback model is accepted too: this agent serves `mini` on the model it has.
    const small = await taskClaim(db, 'small', { limit: 10 });
    expect(small.map((t) => [t.key, t.model])).toEqual([['mini', 'gpt-4o-mini']]);
    expect(await taskClaim(db, 'no-models', { limit: 10 })).toEqual([]);

    // `*` takes any model: the one task left, on its first model.
    await agentCreate(db, 'gateway', [], undefined, { models: ['*'] });
    const any = await taskClaim(db, 'gateway', { limit: 10 });
    expect(any.map((t) => [t.key, t.model])).toEqual([['nobody', 'model-nobody-has']]);
  });

  it('from the third attempt the fallback models come first', async () => {
    await dagCreate(db, 'name: fallback\ntasks:\n  mini: { type: llm, spec: { models: [gpt-4o], fallback_models: [gpt-4o-mini] } }\n');
    await agentCreate(db, 'both', [], undefined, { models: ['gpt-4o', 'gpt-4o-mini'] });
    const models: Array<string | null> = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      const [t] = await taskClaim(db, 'both');
      expect(t).toMatchObject({ key: 'mini', attempt });
      models.push(t!.model);
      if (attempt < 3) {
        await taskFail(db, { taskId: t!.id, fence: t!.fence, errorClass: 'transient', message: 'try again' });
        await retryDue(db, t!.id);
        await promoter.runOnce();
      }
    }
    expect(models).toEqual(['gpt-4o', 'gpt-4o', 'gpt-4o-mini']);
    expect(modelsForAgent({ models: ['a', 'b'], fallbackModels: ['c'] }, 3, ['*'])).toEqual(['c', 'a', 'b']);
  });

  it('a task no registered agent can serve shows in --unclaimable with the models it needs', async () => {
    await dagCreate(db, MODELS_DAG);
    await agentCreate(db, 'claude', [], undefined, { models: ['claude-sonnet'] });
    const rows = await unclaimableList(db);
    expect(rows.map((r) => [r.key, r.reason, r.detail]).sort()).toEqual([
      ['mini', 'no_agent_with_model', 'no active agent that can take it has model gpt-4o, gpt-4o-mini'],
      ['nobody', 'no_agent_with_model', 'no active agent that can take it has model model-nobody-has'],
    ]);
  });

  it('an edit in the dead-letter queue that changes the models moves the task to the agents that have them', async () => {
    await dagCreate(db, `
name: edited
tasks:
  t: { type: llm, max_attempts: 1, spec: { models: [old-model] } }
`);
    await agentCreate(db, 'old', [], undefined, { models: ['old-model'] });
    await agentCreate(db, 'new', [], undefined, { models: ['new-model'] });
    const [t] = await taskClaim(db, 'old');
    await taskFail(db, { taskId: t!.id, fence: t!.fence, errorClass: 'provider', message: 'model retired' });
    const [dl] = await rowsOf<{ id: string }>(db, sql`select id from dead_letters`);
    await dlqEditRetry(db, dl!.id, { models: ['new-model'] });
    expect(await taskClaim(db, 'old')).toEqual([]);
    expect((await taskClaim(db, 'new')).map((c) => c.model)).toEqual(['new-model']);
  });
});

describe('agent concurrency at claim', () => {
  it('an agent holds at most max_concurrent tasks: claimed, running or with its output under validation', async () => {
    await dagCreate(db, `
name: capped
tasks:
${Array.from({ length: 6 }, (_, i) => `  t${i}: { type: noop, priority: ${10 + i}${i === 0 ? ', output: { validation: { kind: llm-judge, rubric: "Good?", threshold: 0.5 } }' : ''} }`).join('\n')}
`);
    await agentCreate(db, 'three', [], undefined, { maxConcurrent: 3 });
    const first = await taskClaim(db, 'three', { limit: 10 });
    expect(first.map((t) => t.key)).toEqual(['t0', 't1', 't2']);
    expect(await taskClaim(db, 'three', { limit: 10 })).toEqual([]);

    // t0's output goes to validation: still the agent's work, still counted.
    const settled = await taskComplete(db, { taskId: first[0]!.id, fence: first[0]!.fence, output: { ok: true } });
    expect(settled.settled).toMatchObject({ status: 'validating' });
    expect(await taskClaim(db, 'three', { limit: 10 })).toEqual([]);
    // t1 completes: one slot frees.
    await taskComplete(db, { taskId: first[1]!.id, fence: first[1]!.fence, output: {} });
    expect((await taskClaim(db, 'three', { limit: 10 })).map((t) => t.key)).toEqual(['t3']);
  });

  it('eight connections claiming for one agent at once never hold more than its max_concurrent (attempts timestamps)', async () => {
    await dagCreate(db, `
name: raced
tasks:
${Array.from({ length: 200 }, (_, i) => `  t${i}: { type: noop }`).join('\n')}
`);
    await agentCreate(db, 'raced', [], undefined, { maxConcurrent: 5 });
    const conns = await Promise.all(Array.from({ length: 8 }, () => databaseOpen({ url: database.url, migrate: false, poolSize: 1 })));
    try {
      let completed = 0;
      let peak = 0;
      let held = 0;
      await Promise.all(conns.map(async (c) => {
        for (let idle = 0; idle < 50 && completed < 200;) {
          const got = await taskClaim(c.db, 'raced', { limit: 3 });
          if (got.length === 0) { idle++; continue; }
          held += got.length;
          peak = Math.max(peak, held);
          const r = await taskCompleteMany(c.db, got.map((t) => ({ taskId: t.id, fence: t.fence, output: {} })));
          held -= got.length;
          completed += r.completed.length;
        }
      }));
      expect(completed).toBe(200);
      expect(peak).toBeGreaterThan(1); // the connections did overlap
      // From the database's own clock: at no instant did more than five attempts of the agent overlap.
      const [row] = await rowsOf<{ most: number }>(db, sql`
        select max(n)::int as most from (
          select (select count(*) from attempts b where b.agent_id = 'raced' and b.started_at <= a.started_at and b.ended_at > a.started_at) as n
          from attempts a where a.agent_id = 'raced'
        ) x`);
      expect(row!.most).toBeLessThanOrEqual(5);
      expect(row!.most).toBeGreaterThan(1);
    } finally {
      await Promise.all(conns.map((c) => c.close()));
    }
  });
});
