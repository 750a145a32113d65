import { beforeEach, describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { dagCreate, databaseReset } from '../helpers/factories.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import { TaskError } from '../../src/errors.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { attemptLogsGet } from '../../src/engine/read/attempt-logs.js';

const database = await testDatabase();
const { db } = database;
const { runner } = agentRunners(database);
beforeEach(() => databaseReset(db));

describe('ctx.log in the TypeScript runtime', () => {
  it('what a handler logs is stored with its attempt, before the outcome: fields, children\'s bindings, errors, one attempt each', async () => {
    const r = runner(defineAgent({
      name: 'talker', capabilities: [],
      async run(task, ctx) {
        ctx.log.info({ file: 'a.ts' }, 'reading %s', 'a.ts');
        ctx.log.child({ step: 'review' }).warn('slow provider');
        ctx.log.debug('below the process level: not kept');
        if (task.attempt === 1) {
          ctx.log.error(new Error('provider said no'), 'giving up on this attempt');
          throw new TaskError('crash', 'first attempt fails');
        }
        ctx.log.info('second attempt works');
        return { ok: true };
      },
    }), { id: 'talker-1' });
    const dagId = await dagCreate(db, 'name: talk\ntasks:\n  t: { type: t, retry: { strategy: immediate } }\n');
    await r.start();
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed', 30_000);
    const [task] = await db.query.tasks.findMany({ where: (t, { eq }) => eq(t.dagId, dagId) });
    const first = (await attemptLogsGet(db, task!.id, { attempt: 1 })).attempt!;
    expect(first.entries.map((l) => [l.level, l.message])).toEqual([
      ['info', 'reading a.ts'], ['warn', 'slow provider'], ['error', 'giving up on this attempt'],
    ]);
    expect(first.entries[0]!.fields).toMatchObject({ file: 'a.ts' });
    expect(first.entries[1]!.fields).toMatchObject({ step: 'review' });
    expect(first.entries[2]!.fields).toMatchObject({ err: { type: 'Error', message: 'provider said no' } });
    const second = (await attemptLogsGet(db, task!.id)).attempt!;
    expect(second).toMatchObject({ attempt: 2, running: false });
    expect(second.entries.map((l) => l.message)).toEqual(['reading a.ts', 'slow provider', 'second attempt works']);
  });

  it('a handler that logs nothing stores nothing', async () => {
    const r = runner(defineAgent({ name: 'quiet', capabilities: [], async run() { return 1; } }), { id: 'quiet-1' });
    const dagId = await dagCreate(db, 'name: hush\ntasks:\n  t: { type: t }\n');
    await r.start();
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    const { rows } = await db.execute('select count(*)::int as n from attempt_log_stats');
    expect(rows[0]).toEqual({ n: 0 });
  });
});
