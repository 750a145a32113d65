import { z } from 'zod';

/**
 * What one validation step concluded. Inline steps produce it directly; a
 * validation task returns it as its output, and a verdict that does not parse
 * is a crashed validation (retried), not a negative one.
 */
export const verdictSchema = z.object({
  pass: z.boolean(),
  /** 0–1, for judged steps. */
  score: z.number().min(0).max(1).optional(),
  reasons: z.array(z.string().max(10_000)).max(100).default([]),
  /** The class of the failure a negative verdict causes; default invalid_output. */
  error_class: z.enum(['invalid_output', 'timeout']).optional(),
  exit_code: z.number().int().nullable().optional(),
  stdout_tail: z.string().max(20_000).optional(),
  stderr_tail: z.string().max(20_000).optional(),
  duration_ms: z.number().nonnegative().optional(),
  model: z.string().max(200).optional(),
}).loose();
export type Verdict = z.infer<typeof verdictSchema>;

/** A verdict as recorded in the validated attempt's history: which step said it. */
export type StepVerdict = Verdict & { step: number; kind: string; validation_task_id?: string };

/** What an LLM judge must answer (checked before it becomes a verdict). */
export const judgeAnswerSchema = z.strictObject({
  pass: z.boolean(),
  score: z.number().min(0).max(1),
  reasons: z.array(z.string()).max(50),
});

export function verdictParse(value: unknown): { verdict: Verdict } | { error: string } {
  const r = verdictSchema.safeParse(value);
  if (r.success) return { verdict: r.data };
  return { error: r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ') };
}

/** The failure message of a negative verdict: which step, and every reason (a schema's violations with their pointers), capped. */
export function verdictSummary(v: StepVerdict): string {
  const head = `${v.kind} step ${v.step + 1} rejected the output`;
  const why = v.reasons.join('; ');
  if (!why) return head;
  return `${head}: ${why.length > 4000 ? `${why.slice(0, 4000)}…` : why}`;
}
