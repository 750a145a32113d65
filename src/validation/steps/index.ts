import { z } from 'zod';
import type { AnyStepKind, ResolveContext, StepPath, StepProblem, StoredStepOf } from './kind.js';
import { approvalStep } from './approval.js';
import { jsonSchemaStep } from './json-schema.js';
import { llmJudgeStep } from './llm-judge.js';
import { regexStep } from './regex.js';
import { testStep } from './test.js';

/**
 * Every kind of output validation step, in the order the file format lists them.
 * A new kind is one module beside this file (see kind.ts) and one entry here.
 */
export const STEP_KINDS = [jsonSchemaStep, regexStep, testStep, llmJudgeStep, approvalStep] as const;

type Kind = (typeof STEP_KINDS)[number];

/**
 * Output validation steps as the engine stores them in `tasks.output_spec.validation`:
 * resolved at submission (schema files read, paths made absolute, `none` dropped),
 * so checking an output never touches the DAG's files again.
 */
export type ValidationStep = StoredStepOf<Kind>;

/** `kind: none`: the task declares that its output is not validated; nothing is stored for it. */
const noneStepFileSchema = z.strictObject({ kind: z.literal('none') });
type StepFileSchema = Kind['fileSchema'] | typeof noneStepFileSchema;

/** A step as written in a DAG file, of any kind. */
const stepFileSchemas: StepFileSchema[] = [...STEP_KINDS.map((k) => k.fileSchema), noneStepFileSchema];
export const validationStepFileSchema = z.discriminatedUnion('kind', stepFileSchemas as [StepFileSchema, ...StepFileSchema[]]);
export type ValidationStepFile = z.infer<typeof validationStepFileSchema>;

/** Every field a step of some kind may have: what a misspelt field is matched against. */
export const STEP_FILE_FIELDS: readonly string[] = [...new Set(STEP_KINDS.flatMap((k) => Object.keys(k.fileSchema.shape)))];

const kindsByName = new Map<string, AnyStepKind>(STEP_KINDS.map((k) => [k.kind, k]));

/** The module of a stored step's kind. */
export function stepKindOf(step: ValidationStep): AnyStepKind {
  const kind = kindsByName.get(step.kind);
  // Only a stored spec edited by hand can name a kind that is not registered.
  if (!kind) throw new Error(`unknown validation step kind ${JSON.stringify(step.kind)}`);
  return kind;
}

/**
 * A task's `output.validation` (one step or a list) as stored steps, or every
 * problem found, each located below `at`.
 */
export async function validationResolve(
  v: ValidationStepFile | ValidationStepFile[] | undefined, at: StepPath, ctx: ResolveContext,
): Promise<{ steps: ValidationStep[]; problems: StepProblem[] }> {
  const listed = Array.isArray(v) ? v : v ? [v] : [];
  const steps: ValidationStep[] = [];
  const problems: StepProblem[] = [];
  for (const [i, s] of listed.entries()) {
    if (s.kind === 'none') continue;
    const p = Array.isArray(v) ? [...at, i] : at;
    const resolved = await (stepKindOf(s as ValidationStep).resolve(s, ctx) as Promise<ValidationStep | StepProblem[]>);
    if (Array.isArray(resolved)) {
      problems.push(...resolved.map((q) => ({ ...q, path: [...p, ...q.path] })));
      if (resolved.some((q) => q.limit)) break;
    } else steps.push(resolved);
  }
  return { steps, problems };
}

/** The steps a stored output spec declares (none: the output completes the task as submitted). */
export function validationStepsOf(outputSpec: unknown): ValidationStep[] {
  const v = (outputSpec as { validation?: unknown } | null | undefined)?.validation;
  return Array.isArray(v) ? (v as ValidationStep[]) : [];
}

export type { AnyInlineStepKind, AnyStepKind, AnyTaskStepKind, DagResolution, ResolveContext, StepProblem, StepPath, ValidationTaskPlan } from './kind.js';
