import { parse as yamlParse } from 'yaml';
import { canonicalJson } from '../canonical-json.js';
import { z } from 'zod';
import { countValue } from '../counts.js';
import { InvalidInputError } from '../errors.js';
import { RESERVED_NAMES } from '../json-guard.js';
import { modelNameSchema } from '../llm-models.js';
import { constraintsSchema, MAP_INPUT_FIELDS, TASK_REF_PATTERN, taskBodySchema } from './file-schema.js';
import type { TaskSpec } from './spec.js';
import { didYouMean } from './suggest.js';

/**
 * What a rerun with a change (`dagent dag rerun --model M --set PATH=VALUE`, engine/dag/rerun-changed.ts) changes in
 * a finished DAG's task specs. Pure: the engine rebuilt the specs from the DAG's rows, and decides from what changed
 * here which tasks run again.
 *
 * `--model M` runs every LLM task on M: its models become [M] and its fallback models none, so every attempt uses M.
 * `--set FIELD=VALUE` sets a field of every LLM task; `--set KEY.FIELD=VALUE` of task KEY alone (any task an agent
 * runs). FIELD is what a DAG file writes under a task's `spec:`, checked by the file format's own zod schema: prompt,
 * models, fallback_models, input (the whole object), input.NAME (one of its fields), constraints.NAME (max_cost_usd,
 * max_tokens, max_duration_sec, heartbeat_sec, capabilities, estimated_tokens). Not context: it wires the task to its
 * upstream tasks, and a rerun keeps the DAG's shape. A first part that is one of these field names is the field, so
 * a task keyed like one is not addressed alone.
 */

/** Most `--set`s one rerun takes: each is applied to every task, and a person writes a few. */
export const SETTINGS_MAX = 100;

/** The capability an agent that calls language models registers (agents/llm.ts): a task that requires it is an LLM task. */
export const LLM_CAPABILITY = 'llm';

/**
 * Whether `--model` and `--set FIELD` change this task: one an agent runs that names a model (models or
 * fallback_models) or requires capability `llm`.
 */
export function taskIsLlm(t: TaskSpec): boolean {
  if (!runsAgent(t)) return false;
  return t.body.models.length > 0 || t.body.fallbackModels.length > 0 || t.requiredCapabilities.includes(LLM_CAPABILITY);
}

/** A task waiting for a signal or a person runs no agent, and has no spec to change. */
function runsAgent(t: TaskSpec): boolean {
  return !t.waitFor && !t.approval;
}

/** One `--set`, parsed and checked: the task it names (null: every LLM task), the field's path, and its value. */
export interface SpecSetting {
  task: string | null;
  /** `prompt`, `input.topic`, `constraints.max_cost_usd`. */
  field: string;
  value: unknown;
}

type Apply = (t: TaskSpec, value: never) => TaskSpec;
interface FieldDef { schema: z.ZodType; apply: Apply; list?: boolean; text?: boolean }

const body = (t: TaskSpec, part: Partial<TaskSpec['body']>): TaskSpec => ({ ...t, body: { ...t.body, ...part } });

/** The fields of `spec:` a rerun may set (the file format's schema for each), and where each goes in a TaskSpec. */
const FIELDS: Record<'prompt' | 'models' | 'fallback_models' | 'input', FieldDef> = {
  prompt: { schema: taskBodySchema.shape.prompt.unwrap(), text: true, apply: (t, v: string) => body(t, { prompt: v }) },
  models: { schema: taskBodySchema.shape.models.unwrap(), list: true, apply: (t, v: string[]) => body(t, { models: v }) },
  fallback_models: { schema: taskBodySchema.shape.fallback_models.unwrap(), list: true, apply: (t, v: string[]) => body(t, { fallbackModels: v }) },
  input: { schema: taskBodySchema.shape.input.unwrap(), apply: (t, v: Record<string, unknown>) => body(t, { input: v }) },
};

const constraints = constraintsSchema.shape;
/** Each constraint a DAG file may write, and the TaskSpec field it sets: every key of the file's constraints (the type checker holds them equal). */
const CONSTRAINTS: { [K in keyof typeof constraints]: FieldDef } = {
  max_cost_usd: { schema: constraints.max_cost_usd.unwrap(), apply: (t, v: number) => ({ ...t, maxCostUsd: v }) },
  max_tokens: { schema: constraints.max_tokens.unwrap(), apply: (t, v: number) => ({ ...t, maxTokens: v }) },
  max_duration_sec: { schema: constraints.max_duration_sec.unwrap(), apply: (t, v: number) => ({ ...t, maxDurationSec: v }) },
  heartbeat_sec: { schema: constraints.heartbeat_sec.unwrap(), apply: (t, v: number) => ({ ...t, heartbeatSec: v }) },
  capabilities: { schema: constraints.capabilities.unwrap(), list: true, apply: (t, v: string[]) => ({ ...t, requiredCapabilities: [...new Set(v)].sort() }) },
  estimated_tokens: { schema: constraints.estimated_tokens.unwrap(), apply: (t, v: number | string) => ({ ...t, estimatedTokens: countValue(v) }) },
};

/** One field of `input`: any value (a DAG file's input is free-form), under a name a shell agent can export. */
const INPUT_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const inputField = (name: string): FieldDef => ({
  schema: z.unknown(),
  apply: (t, v: unknown) => body(t, { input: { ...t.body.input, [name]: v } }),
});

/** The first parts of a path that name a field (not a task). */
const FIELD_HEADS: readonly string[] = [...Object.keys(FIELDS), 'constraints', 'context'];
/** What a path may name, for messages. */
export const SET_FIELDS_TEXT = 'prompt, models, fallback_models, input, input.NAME or constraints.NAME';

function refuse(path: string, message: string): never {
  throw new InvalidInputError(`set ${path}: ${message}`, { field: 'set', path });
}

/** The field a path names after its task key, or a refusal naming it. */
function fieldOf(path: string, parts: string[]): FieldDef {
  const [head, ...rest] = parts;
  if (head === 'context') refuse(path, 'context wires a task to its upstream tasks, and a rerun keeps the DAG\'s shape; set prompt or input instead');
  if (head === 'constraints') {
    if (rest.length !== 1) refuse(path, `name one constraint: constraints.NAME, one of ${Object.keys(CONSTRAINTS).join(', ')}`);
    const def = Object.hasOwn(CONSTRAINTS, rest[0]!) ? CONSTRAINTS[rest[0] as keyof typeof CONSTRAINTS] : undefined;
    return def ?? refuse(path, `unknown constraint ${rest[0]}${didYouMean(rest[0]!, Object.keys(CONSTRAINTS))}; one of ${Object.keys(CONSTRAINTS).join(', ')}`);
  }
  if (head === 'input' && rest.length > 1) refuse(path, 'name one input field: input.NAME (a value in it may be a list or an object)');
  if (head === 'input' && rest.length === 1) {
    const name = rest[0]!;
    if (!INPUT_NAME.test(name) || RESERVED_NAMES.has(name)) refuse(path, 'an input field name must match ^[A-Za-z_][A-Za-z0-9_]*$ and not be a name every object has');
    return inputField(name);
  }
  const def = head !== undefined && Object.hasOwn(FIELDS, head) ? FIELDS[head as keyof typeof FIELDS] : undefined;
  if (!def) refuse(path, `unknown field ${parts.join('.') || '(none)'}${didYouMean(head ?? '', FIELD_HEADS)}; a field is ${SET_FIELDS_TEXT}`);
  if (rest.length) refuse(path, `${head} has no fields of its own`);
  return def;
}

/**
 * `path` and its value as a setting: the task it names and the field, the value checked by the DAG file format's
 * schema for that field (a refusal names the path and says what the field takes). `fromText`: the value is text as
 * typed on a command line: prompt takes it as it is, any other field reads it as YAML (`0.5`, `[a, b]`, `{k: v}`),
 * and a list field takes one item as a list of one (`models=gpt-4o`).
 */
export function specSettingParse(path: string, value: unknown, fromText = false): SpecSetting {
  const parts = path.split('.');
  const task = FIELD_HEADS.includes(parts[0]!) ? null : parts.shift()!;
  if (task !== null && !TASK_REF_PATTERN.test(task)) refuse(path, `${task || '(nothing)'} is neither a field (${SET_FIELDS_TEXT}) nor a task key`);
  if (task !== null && parts.length === 0) {
    refuse(path, `${task} is not a field${didYouMean(task, FIELD_HEADS)}: a field is ${SET_FIELDS_TEXT}; for one task, write its key first (${task}.prompt)`);
  }
  const def = fieldOf(path, parts);
  let v = value;
  if (fromText && typeof value === 'string' && !def.text) {
    try {
      v = yamlParse(value);
    } catch (e) {
      refuse(path, `not a YAML value (${(e as Error).message.split('\n')[0]})`);
    }
  }
  if (def.list && v !== null && typeof v !== 'object') v = [v];
  const parsed = def.schema.safeParse(v);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    refuse(path, `${issue.path.length ? `[${issue.path.join('.')}] ` : ''}${issue.message}`);
  }
  return { task, field: parts.join('.'), value: parsed.data };
}

/** `t` with the setting applied (one it names, or every LLM task's). */
function settingApply(t: TaskSpec, s: SpecSetting): TaskSpec {
  const parts = s.field.split('.');
  if (t.forEach && parts[0] === 'input') {
    const names = parts.length === 2 ? [parts[1]!] : Object.keys(s.value as object);
    const taken = names.find((n) => (MAP_INPUT_FIELDS as readonly string[]).includes(n));
    if (taken) refuse(`${t.key}.${s.field}`, `for_each fills in input.${taken} for each child of ${t.key}: choose another name`);
  }
  return fieldOf(s.field, parts).apply(t, s.value as never);
}

export interface SpecsChange {
  /** Run every LLM task on this model. */
  model?: string;
  settings: SpecSetting[];
}

/**
 * The tasks with the change made, and the keys of those it changed (in their order). `--model` first, then the
 * settings for every LLM task, then those for one task (which win). A setting for a task the DAG lacks, or for a
 * task no agent runs, is refused; whether a task is an LLM task is decided on its spec before the change.
 */
export function specsChange(tasks: readonly TaskSpec[], change: SpecsChange): { tasks: TaskSpec[]; changed: string[] } {
  if (change.model !== undefined) {
    const m = modelNameSchema.safeParse(change.model);
    if (!m.success) throw new InvalidInputError(`model: ${m.error.issues[0]!.message}`, { field: 'model' });
  }
  const byKey = new Map(tasks.map((t) => [t.key, t]));
  for (const s of change.settings) {
    if (s.task === null) continue;
    const t = byKey.get(s.task);
    if (!t) refuse(`${s.task}.${s.field}`, `the DAG has no task ${s.task}${didYouMean(s.task, byKey.keys())}`);
    if (!runsAgent(t)) refuse(`${s.task}.${s.field}`, `task ${s.task} waits for ${t.waitFor ? 'a signal' : 'a person'}: no agent runs it, so it has no spec to set`);
  }
  const changed: string[] = [];
  const out = tasks.map((t) => {
    let next = t;
    if (taskIsLlm(t)) {
      if (change.model !== undefined) next = body(next, { models: [change.model], fallbackModels: [] });
      for (const s of change.settings) if (s.task === null) next = settingApply(next, s);
    }
    for (const s of change.settings) if (s.task === t.key) next = settingApply(next, s);
    if (canonicalJson(next) !== canonicalJson(t)) changed.push(t.key);
    return next;
  });
  return { tasks: out, changed };
}
