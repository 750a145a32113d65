/**
 * Output validation steps as the engine stores them in `tasks.output_spec.validation`:
 * resolved at submission (schema files read, paths made absolute, `none` dropped),
 * so checking an output never touches the DAG's files again.
 */
export type ValidationStep =
  | { kind: 'json-schema'; schema: Record<string, unknown>; schemaFile?: string }
  | { kind: 'regex'; pattern: string; flags?: string; field?: string }
  | { kind: 'test'; command: string; cwd?: string; timeoutSec: number; env: Record<string, string> }
  | { kind: 'llm-judge'; rubric: string; threshold: number; model?: string };

/** Steps checked by the process that submits the output, inside the submitting transaction. */
export type InlineStep = Extract<ValidationStep, { kind: 'json-schema' | 'regex' }>;
/** Steps run as validation tasks by agents with the matching capability. */
export type DelegatedStep = Extract<ValidationStep, { kind: 'test' | 'llm-judge' }>;

export function stepIsInline(s: ValidationStep): s is InlineStep {
  return s.kind === 'json-schema' || s.kind === 'regex';
}

/** The capability (and task type) of the validation task that runs a delegated step. */
export function stepCapability(s: DelegatedStep): 'validate:test' | 'validate:judge' {
  return s.kind === 'test' ? 'validate:test' : 'validate:judge';
}

export const TEST_STEP_DEFAULT_TIMEOUT_SEC = 300;

/** The steps a stored output spec declares (none: the output completes the task as submitted). */
export function validationStepsOf(outputSpec: unknown): ValidationStep[] {
  const v = (outputSpec as { validation?: unknown } | null | undefined)?.validation;
  return Array.isArray(v) ? (v as ValidationStep[]) : [];
}
