import { z } from 'zod';
import { LIMITS } from '../config/index.js';
import { InvalidInputError } from '../errors.js';
import { durationSchema } from '../durations.js';
import { capabilitySchema, constraintsSchema, contextRefSchema, KEY_PATTERN, outputSchema, retrySchema } from './file-schema.js';
import { dagFileNormalize } from './normalize.js';
import type { TaskSpec } from './spec.js';
import { validationResolve, type ValidationStep } from '../validation/steps/index.js';

/**
 * A subtask an agent spawns at runtime (`ctx.spawn`). The same vocabulary as a
 * task in a DAG file, so what a YAML author knows carries over; `requires` is
 * short for `spec.constraints.capabilities`.
 */
export const subtaskSpecSchema = z.strictObject({
  key: z.string().regex(KEY_PATTERN, { error: 'must match ^[a-z][a-z0-9_-]*$ (max 64 chars)' })
    .describe('unique among the parent\'s subtasks; stored as <parent key>/<key>'),
  type: z.string().regex(KEY_PATTERN, { error: 'must match ^[a-z][a-z0-9_-]*$ (max 64 chars)' }),
  title: z.string().max(200).optional(),
  requires: z.array(capabilitySchema).max(32).optional(),
  spec: z.strictObject({
    prompt: z.string().max(100_000).optional(),
    context: z.array(contextRefSchema).max(64).optional(),
    constraints: constraintsSchema.optional(),
    models: z.array(z.string().max(200)).max(16).optional(),
    fallback_models: z.array(z.string().max(200)).max(16).optional(),
    input: z.record(z.string(), z.unknown()).optional(),
  }).optional(),
  /** Sibling keys from the same spawn call, or keys of tasks already in the DAG. */
  depends_on: z.array(z.string().min(1).max(200)).max(1000).optional(),
  priority: z.number().int().min(0).max(100).optional(),
  estimate: durationSchema.optional(),
  max_attempts: z.number().int().min(1).max(100).optional(),
  retry: retrySchema.optional(),
  output: outputSchema.optional(),
  tags: z.array(z.string().max(64)).max(32).optional(),
});
export type SubtaskSpec = z.input<typeof subtaskSpecSchema>;

/**
 * Validate subtask specs and normalize them like DAG file tasks. Keys come back
 * local (`lint`); depends_on and context refs are left as written for the spawn
 * to resolve against the siblings and the DAG.
 */
export async function subtaskSpecsParse(specs: unknown, defaults: { priority: number }): Promise<TaskSpec[]> {
  const parsed = z.array(subtaskSpecSchema).min(1).max(LIMITS.spawnPerCall).safeParse(specs);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const [index, ...field] = issue.path.map(String);
    const where = index === undefined ? 'subtasks' : `subtasks[${index}]${field.length ? `.${field.join('.')}` : ''}`;
    throw new InvalidInputError(`${where}: ${issue.message}`, { issues: parsed.error.issues });
  }
  const keys = new Set<string>();
  for (const s of parsed.data) {
    if (keys.has(s.key)) throw new InvalidInputError(`subtasks: key ${s.key} appears twice`);
    keys.add(s.key);
  }
  const tasks = Object.fromEntries(parsed.data.map((s) => {
    const constraints = { ...s.spec?.constraints, ...(s.requires ? { capabilities: s.requires } : {}) };
    const { key, requires: _requires, ...rest } = s;
    return [key, { ...rest, spec: { ...s.spec, constraints } }];
  }));
  // Validation steps are resolved like a DAG file's, relative paths from the agent's working directory.
  const validation: Record<string, ValidationStep[]> = {};
  for (const s of parsed.data) {
    const r = await validationResolve(s.output?.validation, [], { baseDir: process.cwd() });
    const problem = r.problems[0];
    if (problem) {
      const where = ['output', 'validation', ...problem.path].map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('');
      throw new InvalidInputError(`subtasks[${parsed.data.indexOf(s)}]${where}: ${problem.message}`);
    }
    validation[s.key] = r.steps;
  }
  return dagFileNormalize({ name: 'subtasks', tasks, defaults: { priority: defaults.priority } }, {}, undefined, validation).tasks;
}
