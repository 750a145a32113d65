import { z } from 'zod';
import { modelNameSchema } from '../../llm-models.js';
import type { TaskStepKind } from './kind.js';

const fileSchema = z.strictObject({
  kind: z.literal('llm-judge'),
  rubric: z.string().max(100_000),
  threshold: z.number().min(0).max(1).describe('lowest passing score, 0–1'),
  model: modelNameSchema.optional().describe('default: the task\'s models (then the judge agent\'s DAGENT_JUDGE_MODEL)'),
}).describe('an LLM scores the output against a rubric; passes at or above the threshold');

export interface LlmJudgeStep { kind: 'llm-judge'; rubric: string; threshold: number; model?: string }

/** An LLM, run by an agent with validate:judge, scores the output against a rubric. */
export const llmJudgeStep: TaskStepKind<'llm-judge', typeof fileSchema, LlmJudgeStep> = {
  kind: 'llm-judge',
  mode: 'task',
  capability: 'validate:judge',
  fileSchema,
  resolve: (s) => ({ kind: 'llm-judge', rubric: s.rubric, threshold: s.threshold, ...(s.model ? { model: s.model } : {}) }),
  // A step that names no model judges with the task's models: a judge agent that has one of them takes it.
  task: (step) => ({ prompt: step.rubric, models: step.model ? [step.model] : [], modelsOfSubject: !step.model }),
  verdictProblem: (step, verdict) => (verdict.score === undefined ? `score: required, the step's threshold ${step.threshold} is applied to it` : undefined),
  verdictApply(step, verdict) {
    if (verdict.score === undefined) return verdict; // refused before (verdictProblem)
    // The threshold is the DAG's, so the engine applies it, whatever the judge said about passing.
    const pass = verdict.score >= step.threshold;
    return { ...verdict, pass, reasons: [`score ${verdict.score} ${pass ? '≥' : '<'} threshold ${step.threshold}`, ...verdict.reasons] };
  },
};
