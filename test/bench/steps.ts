/**
 * What an attempt's calls cost, one at a time: recording a durable step (ctx.step: one fenced statement), a later
 * attempt's replay of it (one statement that reads the step and records the replay), each with a result of ~1 KiB,
 * and a usage report (ctx.reportCost: a ledger row charged to the task, its DAG and its agent, and the limits read
 * back, in one statement), beside a task without any (its claim and completion, one at a time). Statements counted
 * on the wire as completion-paths.ts does (BEGIN, COMMIT and ROLLBACK left out).
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import type { Database } from '../../src/db/handle.js';
import { dagSourceLoad } from '../../src/dag/load.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { stepRecord, stepReplay } from '../../src/engine/attempt/steps.js';
import { usageReport } from '../../src/engine/attempt/usage.js';
import type { statementCounter } from './completion-paths.js';

export interface StepFigures { name: string; ms: number[]; statements: number }

/** `tasks` tasks of `steps` steps each: recorded by one claim, replayed by the next; and `tasks` no-op tasks. */
export async function durableStepsBench(d: Database, counter: ReturnType<typeof statementCounter>, tasks: number, steps: number): Promise<StepFigures[]> {
  const yaml = (name: string, type: string) => `name: ${name}\ndefaults: { max_attempts: 3, retry: { strategy: immediate } }\ntasks:\n${
    Array.from({ length: tasks }, (_, i) => `  t${i}: { type: ${type} }`).join('\n')}\n`;
  const [plainDag, steppedDag] = await dagSubmit(d.db, [await dagSourceLoad(yaml('plain', 'plain'), 'plain.yaml'), await dagSourceLoad(yaml('stepped', 'stepped'), 'stepped.yaml')]);
  await agentRegister(d.db, { id: 'steps-agent', type: 'bench', capabilities: [], maxConcurrent: 2 * tasks });
  const result = { text: 'x'.repeat(1000) };
  const timed = async (name: string, calls: Array<() => Promise<unknown>>): Promise<StepFigures> => {
    const ms: number[] = [];
    let statements = 0;
    for (const call of calls) {
      const t0 = performance.now();
      const r = await counter.during(call);
      ms.push(performance.now() - t0);
      statements += r.statements;
    }
    return { name, ms, statements: statements / calls.length };
  };

  // A task without steps: its claim and its completion, one task at a time.
  const plain = await timed('a task without steps (claim, then complete)', Array.from({ length: tasks }, () => async () => {
    const [t] = await taskClaim(d.db, 'steps-agent', { limit: 1, start: true, dagId: plainDag!.dagId });
    await taskComplete(d.db, { taskId: t!.id, fence: t!.fence, output: { ok: true } });
  }));
  const held = await taskClaim(d.db, 'steps-agent', { limit: tasks, start: true, dagId: steppedDag!.dagId });
  const record = await timed(`record a step (~1 KiB result), ${steps} a task`, held.flatMap((t) => Array.from({ length: steps }, (_, s) => () =>
    stepRecord(d.db, { taskId: t.id, fence: t.fence, name: `call ${s}`, result, durationMs: 1, costUsd: 0.001 }))));
  // The next claim of each task (its lease lapsed, as after a crash), which replays what the first recorded.
  await d.db.execute(sql`update tasks set status = 'ready', claimed_by = null, lease_expires_at = null, fence = fence + 1 where type = 'stepped'`);
  const again = await taskClaim(d.db, 'steps-agent', { limit: tasks, start: true, dagId: steppedDag!.dagId });
  const replay = await timed('replay a step (read it, record the replay)', again.flatMap((t) => Array.from({ length: steps }, (_, s) => async () => {
    if (!(await stepReplay(d.db, { taskId: t.id, fence: t.fence }, `call ${s}`))) throw new Error(`call ${s} of ${t.id} not recorded`);
  })));
  const usage = await timed('report usage (a ledger row, charged to the task, its DAG and agent)', again.flatMap((t) => Array.from({ length: steps }, (_, s) => () =>
    usageReport(d.db, { taskId: t.id, fence: t.fence }, { reportKey: `call ${s}`, costUsd: 0.001, tokensIn: 500, tokensOut: 50, model: 'bench' }))));
  return [plain, record, replay, usage];
}
