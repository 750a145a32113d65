import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { defineAgent } from '../../src/index.js';
import { testDatabase } from '../helpers/db.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';

// An output PostgreSQL cannot store (an unpaired surrogate) was recorded as an agent crash: the
// completion batch failed, the lease lapsed and the task ended a poison pill. Now it fails its
// own attempt as invalid_output at once, and the tasks completed beside it are not held up.
const database = await testDatabase();
const { db } = database;
const { run } = agentRunners(database, { pollIntervalMs: 100 });

describe('an output the database cannot store', () => {
  it('fails its attempt as invalid_output with the field named; a good output in the same agent completes', async () => {
    await run(defineAgent({
      name: 'surrogates',
      capabilities: ['surrogate'],
      maxConcurrent: 2,
      run: async (task) => (task.key === 'bad' ? { s: 'half a pair: \ud800' } : { s: 'fine' }),
    }));
    const dagId = await dagCreate(db, `name: unstorable
tasks:
  bad: { type: t, max_attempts: 1, spec: { constraints: { capabilities: [surrogate] } } }
  good: { type: t, spec: { constraints: { capabilities: [surrogate] } } }
`);
    await eventually('both settled', async () => {
      const rows = await rowsOf<{ key: string; status: string }>(db, sql`select key, status from tasks where dag_id = ${dagId} order by key`);
      return rows.map((r) => r.status).join() === 'dead_lettered,completed';
    });
    const [a] = await rowsOf<{ outcome: string; error_class: string; error_message: string }>(db, sql`
      select a.outcome, a.error_class, a.error_message from attempts a join tasks t on t.id = a.task_id where t.dag_id = ${dagId} and t.key = 'bad'`);
    expect(a).toMatchObject({ outcome: 'failed', error_class: 'invalid_output', error_message: expect.stringMatching(/output cannot be stored as JSON: output\.s: .*surrogate/) });
  });
});
