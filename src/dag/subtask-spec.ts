import { z } from 'zod';
import { LEASE_DEFAULTS, LIMITS } from '../config/index.js';
import { durationSchema } from '../durations.js';
import { ForbiddenError, InvalidInputError } from '../errors.js';
import { capabilitySchema, constraintsSchema, contextRefSchema, keySchema, outputSchema, retrySchema } from './file-schema.js';
import { modelNameSchema } from '../llm-models.js';
import { dagFileNormalize } from './normalize.js';
import type { ConcurrencySpec, SpawnPolicy, SpawnTemplate, TaskSpec } from './spec.js';
import { didYouMean } from './suggest.js';

/**
 * A subtask an agent spawns at runtime (`ctx.spawn`). The same vocabulary as a
 * task in a DAG file, so what a YAML author knows carries over; `requires` is
 * short for `spec.constraints.capabilities`. Agents are not trusted: what a subtask
 * may say depends on the DAG's `spawn` block (see subtaskSpecsParse).
 */
export const subtaskSpecSchema = z.strictObject({
  key: keySchema.describe('unique among the parent\'s subtasks; stored as <parent key>/<key>'),
  template: keySchema.optional().describe('a template of the DAG\'s spawn block: it fixes what runs; the subtask fills in data'),
  type: keySchema.optional().describe('required without a template'),
  title: z.string().max(200).optional(),
  requires: z.array(capabilitySchema).max(32).optional(),
  spec: z.strictObject({
    prompt: z.string().max(100_000).optional(),
    context: z.array(contextRefSchema).max(64).optional(),
    constraints: constraintsSchema.optional(),
    models: z.array(modelNameSchema).max(16).optional(),
    fallback_models: z.array(modelNameSchema).max(16).optional(),
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
type Subtask = z.infer<typeof subtaskSpecSchema>;

/** Where a spawn happens: the parent's priority (the default), the DAG's policy, and what free-form subtasks inherit from the parent. */
export interface SpawnContext {
  priority: number;
  policy: SpawnPolicy;
  parent: {
    requiredCapabilities: string[]; models: string[]; fallbackModels: string[];
    maxCostUsd: number | null; maxDurationSec: number | null; heartbeatSec: number | null;
    /** Most tokens an attempt of it may report: its subtasks' ceiling. */
    maxTokens?: number | null;
    /** Its token estimate (rate limits): a free-form subtask reserves this (an agent cannot set its own). */
    estimatedTokens?: number | null;
    /** Its concurrency key: subtasks work on what the parent works on, so they share it (unless a template names its own). */
    concurrency: ConcurrencySpec | null;
  };
}

/** What a DAG without a spawn block allows: subtasks of the agents' own making, data only. */
export const SPAWN_POLICY_DEFAULT: SpawnPolicy = { templates: {}, freeForm: true };

/**
 * Validate subtask specs against what the DAG allows, and normalize them like DAG
 * file tasks. A subtask from a template takes everything that decides what runs
 * (type, capabilities, constraints, validation, retries, the fixed input fields)
 * from the template; the agent fills in the data (title, prompt, context, the
 * input fields the template accepts, dependencies, priority). A subtask of the
 * agent's own making (when the DAG allows them) is data only: no capabilities, and
 * no validation step that runs code, reads a file or needs a validator. Anything
 * else is a ForbiddenError naming the field, and nothing is written. Keys come
 * back local (`lint`); depends_on and context refs are left as written for the
 * spawn to resolve against the siblings and the DAG.
 */
export async function subtaskSpecsParse(specs: unknown, o: SpawnContext): Promise<TaskSpec[]> {
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
  const out: TaskSpec[] = [];
  for (const [i, s] of parsed.data.entries()) {
    const where = `subtasks[${i}]`;
    out.push(s.template !== undefined ? fromTemplate(s, where, o) : freeForm(s, where, o));
  }
  return out;
}

function fromTemplate(s: Subtask, where: string, o: SpawnContext): TaskSpec {
  const name = s.template!;
  const names = Object.keys(o.policy.templates);
  if (!Object.hasOwn(o.policy.templates, name)) {
    throw new ForbiddenError(`${where}.template: the DAG declares no template "${name}"${didYouMean(name, names)} (its templates: ${names.join(', ') || 'none'})`, { field: `${where}.template` });
  }
  const t: SpawnTemplate = o.policy.templates[name]!;
  const fixed = (field: string, what: string) => new ForbiddenError(`${where}.${field}: template ${name} fixes ${what}; an agent cannot set it`, { field: `${where}.${field}` });
  if (s.type !== undefined && s.type !== t.type) throw fixed('type', 'the type');
  if (s.requires?.length) throw fixed('requires', 'the capabilities');
  if (s.spec?.constraints) throw fixed('spec.constraints', 'the constraints');
  if (s.output) throw fixed('output', 'the output and its validation');
  if (s.max_attempts !== undefined) throw fixed('max_attempts', 'the attempts');
  if (s.retry) throw fixed('retry', 'the retry policy');
  if ((s.spec?.models || s.spec?.fallback_models) && (t.body.models.length || t.body.fallbackModels.length)) throw fixed('spec.models', 'the models');
  const input = s.spec?.input ?? {};
  for (const field of Object.keys(input)) {
    if (!t.accepts.includes(field)) {
      throw new ForbiddenError(`${where}.spec.input.${field}: template ${name} does not accept ${field} (it accepts: ${t.accepts.join(', ') || 'nothing'})`, { field: `${where}.spec.input.${field}` });
    }
  }
  return {
    key: s.key,
    type: t.type,
    title: s.title ?? t.title,
    body: {
      prompt: s.spec?.prompt ?? t.body.prompt,
      context: s.spec?.context ?? [],
      models: t.body.models.length ? t.body.models : s.spec?.models ?? [],
      fallbackModels: t.body.fallbackModels.length ? t.body.fallbackModels : s.spec?.fallback_models ?? [],
      // The template's fixed fields win; `accepts` never names one (refused when the DAG was submitted).
      input: { ...input, ...t.body.input },
      // The template's author chose the repository: the spawning agent cannot (subtaskSpecSchema has no such field).
      ...(t.body.workspace ? { workspace: t.body.workspace } : {}),
    },
    requiredCapabilities: t.requiredCapabilities,
    maxCostUsd: t.maxCostUsd,
    ...(t.maxTokens !== undefined ? { maxTokens: t.maxTokens } : {}),
    ...(t.estimatedTokens !== undefined ? { estimatedTokens: t.estimatedTokens } : {}),
    maxDurationSec: t.maxDurationSec,
    heartbeatSec: t.heartbeatSec,
    // The agent's priority is no more urgent than its parent's: its subtasks never jump other work's queue.
    priority: s.priority !== undefined ? Math.max(s.priority, o.priority) : t.priority ?? o.priority,
    boostPerMinute: t.boostPerMinute ?? 0,
    ...(t.estimateSec !== undefined ? { estimateSec: t.estimateSec } : {}),
    dependsOn: s.depends_on ?? [],
    maxAttempts: t.maxAttempts,
    retry: t.retry,
    output: t.output,
    tags: [...new Set([...t.tags, ...(s.tags ?? [])])],
    origin: 'template',
    ...(t.concurrency ?? o.parent.concurrency ? { concurrency: t.concurrency ?? o.parent.concurrency! } : {}),
  };
}

/**
 * A subtask of the agent's own making: data only. It inherits the parent's capabilities and
 * models (so only agents that could run the parent claim it, on the models its author chose),
 * its ceilings (max cost, duration, heartbeat: lower ones only) and at best its priority,
 * and carries no validation: how an output is checked is the DAG author's to say, and an
 * agent's own schema would be code of its making running in the server.
 */
function freeForm(s: Subtask, where: string, o: SpawnContext): TaskSpec {
  if (!o.policy.freeForm) {
    throw new ForbiddenError(`${where}: this DAG lets agents spawn only from its templates (${Object.keys(o.policy.templates).join(', ') || 'none'}); name one with template:`, { field: where });
  }
  if (s.type === undefined) throw new InvalidInputError(`${where}.type: required without a template`);
  const refuse = (field: string, why: string) => new ForbiddenError(`${where}.${field}: ${why}`, { field: `${where}.${field}` });
  const viaTemplate = 'declare a template in the DAG\'s spawn block for work like this';
  if (s.requires?.length || s.spec?.constraints?.capabilities?.length) {
    throw refuse(s.requires?.length ? 'requires' : 'spec.constraints.capabilities', `an agent cannot choose capabilities, which say who runs a task and so what runs (a subtask of its own making inherits its parent's); ${viaTemplate}`);
  }
  if (s.spec?.models?.length || s.spec?.fallback_models?.length) {
    throw refuse(s.spec?.models?.length ? 'spec.models' : 'spec.fallback_models', `an agent cannot choose models, which say what runs and what it costs (a subtask of its own making inherits its parent's); ${viaTemplate}`);
  }
  if (s.spec?.constraints?.estimated_tokens !== undefined) {
    throw refuse('spec.constraints.estimated_tokens', `an agent cannot choose what its subtask reserves under a model's rate limit (a subtask of its own making reserves its parent's estimate, else the limit's default); ${viaTemplate}`);
  }
  if (s.output?.validation !== undefined) {
    throw refuse('output.validation', `an agent cannot say how its work is validated: validation steps come from the DAG file (or a template it declares); ${viaTemplate}`);
  }
  const { key, requires: _requires, template: _template, ...rest } = s;
  const task = { ...rest, type: s.type, spec: { ...s.spec, constraints: { ...s.spec?.constraints } } };
  const [spec] = dagFileNormalize({ name: 'subtasks', tasks: { [key]: task }, defaults: { priority: o.priority } }, {}, undefined, { [key]: [] }).tasks;
  const atMost = (mine: number | undefined, parents: number | null) => (parents === null ? mine : Math.min(mine ?? parents, parents));
  return {
    ...spec!,
    // Ceilings come from the parent (its DAG's defaults included): the agent may only tighten them.
    maxCostUsd: atMost(spec!.maxCostUsd, o.parent.maxCostUsd),
    maxTokens: atMost(spec!.maxTokens, o.parent.maxTokens ?? null),
    maxDurationSec: atMost(spec!.maxDurationSec, o.parent.maxDurationSec),
    // The author's estimate, as the parent's: an agent's own would let it reserve less than its share, or so much it holds the limit up.
    ...(o.parent.estimatedTokens != null ? { estimatedTokens: o.parent.estimatedTokens } : {}),
    // A parent without one beats at the default interval: a longer beat (a longer lease) is not the agent's to take.
    heartbeatSec: atMost(spec!.heartbeatSec, o.parent.heartbeatSec ?? (spec!.heartbeatSec !== undefined ? LEASE_DEFAULTS.heartbeatSec : null)),
    priority: Math.max(spec!.priority, o.priority),
    requiredCapabilities: [...o.parent.requiredCapabilities],
    body: { ...spec!.body, models: [...o.parent.models], fallbackModels: [...o.parent.fallbackModels] },
    origin: 'agent',
    ...(o.parent.concurrency ? { concurrency: o.parent.concurrency } : {}),
  };
}
