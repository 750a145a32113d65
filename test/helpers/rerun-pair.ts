import type { Db } from '../../src/db/handle.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { usageReport } from '../../src/engine/attempt/usage.js';
import { dagRerunChanged, type RerunChange } from '../../src/engine/dag/rerun-changed.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { dagCreate } from './factories.js';

/**
 * A DAG and its rerun with a change, both run to completion by one agent, for the tests of `dag compare` (CLI, HTTP,
 * dashboard): gather is tool work (carried over by a rerun with --model), draft and polish name a model (they run
 * again); draft's output is held to a regex step, so its attempt records a verdict.
 */
export const PAIR_YAML = `
name: report
title: A report, twice
tasks:
  gather: { type: gather, spec: { constraints: { capabilities: [tool] } } }
  draft:
    type: write
    depends_on: [gather]
    spec: { prompt: Write the report, context: [gather], models: [model-a] }
    output: { validation: [{ kind: regex, pattern: report }] }
  polish: { type: write, depends_on: [draft], spec: { context: [draft], models: [model-a] } }
`;

export interface RunPlan {
  /** The output of each task, by key and the model its attempt ran on. */
  output: (key: string, model: string | null) => unknown;
  /** What each attempt reports; `null` cost: the reporter had no price (cost unknown). */
  spend?: (key: string) => { costUsd: number | null; tokensIn: number; tokensOut: number } | undefined;
}

/** Claim and complete every task of `dagId` as `agentId`, as `plan` says. */
export async function dagRunAll(db: Db, agentId: string, dagId: string, plan: RunPlan): Promise<void> {
  for (;;) {
    const held = await taskClaim(db, agentId, { dagId, limit: 10 });
    if (held.length === 0) return;
    for (const t of held) {
      const spend = plan.spend?.(t.key);
      const ref = { taskId: t.id, fence: t.fence };
      if (spend?.costUsd === null) await usageReport(db, ref, { reportKey: 'unpriced', costUsd: null, tokensIn: spend.tokensIn, tokensOut: spend.tokensOut, model: t.model });
      const charged = spend && spend.costUsd !== null ? { costUsd: spend.costUsd, tokensIn: spend.tokensIn, tokensOut: spend.tokensOut } : {};
      await taskComplete(db, { ...ref, output: plan.output(t.key, t.model), model: t.model, ...charged });
    }
  }
}

/** The pair: the first run with `first`, its rerun with `change` run with `second`. */
export async function rerunPairMade(db: Db, o: { agentId: string; change: RerunChange; first: RunPlan; second: RunPlan }): Promise<{ first: string; rerun: string }> {
  await agentRegister(db, { id: o.agentId, type: 'test', capabilities: ['tool'], models: ['*'], maxConcurrent: 100 });
  const first = await dagCreate(db, PAIR_YAML);
  await dagRunAll(db, o.agentId, first, o.first);
  const r = await dagRerunChanged(db, first, o.change, { by: 'test' });
  await dagRunAll(db, o.agentId, r.dagId, o.second);
  return { first, rerun: r.dagId };
}
