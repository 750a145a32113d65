import type { Db } from '../../db/handle.js';
import { agentJudgeModels } from '../../db/queries/agents.js';
import type { DagSpec, TaskSpec } from '../../dag/spec.js';
import { validationStepsOf } from '../../validation/steps/index.js';

/**
 * Before a DAG is accepted, its llm-judge steps are checked against the judges that can take them:
 * an active agent with validate:judge, serving the DAG's tenant, that registered one of the models the step will be
 * judged with (the step's model, else the task's models and fallback models; none named: any judge), or `*`.
 * A step no judge can serve would leave its task VALIDATING after its agent has spent the attempt:
 * found at submit, not after the spend.
 */
export interface JudgeGap {
  dag: string;
  /** The task (`draft`) or spawn template (`spawn.templates.review`) that declares the step. */
  where: string;
  /** 1-based, as a person counts the steps. */
  step: number;
  /** The models it will be judged with; empty: any. */
  models: string[];
}

/** The llm-judge steps of `specs` that no active judge of `tenant` (the DAGs') can serve. */
export async function judgeGapsFind(db: Db, specs: DagSpec[], tenant: string): Promise<JudgeGap[]> {
  const steps = specs.flatMap((spec) => [
    ...spec.tasks.map((t) => ({ spec, where: t.key, task: t })),
    ...Object.entries(spec.spawn?.templates ?? {}).map(([name, t]) => ({ spec, where: `spawn.templates.${name}`, task: t })),
  ].flatMap(({ spec: s, where, task }) => validationStepsOf(task.output).flatMap((step, i) => (
    step.kind === 'llm-judge' ? [{ dag: s.name, where, step: i + 1, models: step.model ? [step.model] : taskModels(task) }] : []
  ))));
  if (steps.length === 0) return [];
  const judges = await agentJudgeModels(db, tenant);
  return steps.filter((s) => !judges.some((models) => s.models.length === 0 || models.includes('*') || s.models.some((m) => models.includes(m))));
}

function taskModels(t: Pick<TaskSpec, 'body'>): string[] {
  return [...new Set([...t.body.models, ...t.body.fallbackModels])];
}

/** One line per gap: where, what it needs, what to do. */
export function judgeGapText(g: JudgeGap): string {
  const needs = g.models.length ? `a judge with one of the models ${g.models.join(', ')}` : 'a judge';
  return `DAG ${g.dag}: ${g.where}: llm-judge step ${g.step} needs ${needs}, and no active agent with validate:judge has it `
    + `(start one, e.g. dagent agent run validate-judge with DAGENT_JUDGE_MODELS${g.models.length ? `=${g.models[0]}` : ''})`;
}
