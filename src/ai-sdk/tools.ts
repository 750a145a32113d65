import { jsonSchema, tool, type JSONSchema7, type ToolSet } from 'ai';
import { z } from 'zod';
// From the public API, as a user's code would: the CommonJS build of dagent/ai-sdk then shares dagent's classes.
import { InvalidInputError, type SpawnedChild, type SubtaskSpec, type TaskContext } from '../index.js';

/** What of a task's context the tools use: an agent's `ctx` has all of it. */
export type DagentToolsContext = Pick<TaskContext, 'inputs' | 'children' | 'log' | 'spawn'>;

/**
 * A tool a DAG's author declares for a task (`spec.input.tools`): a name and description the model sees, and the
 * template of the DAG's spawn block it spawns from. Data only: the model fills in the subtask's key, prompt and the
 * input fields the template accepts; what runs, and how it is checked, is the template's.
 */
export interface DagentToolDeclaration {
  name: string;
  description: string;
  spawn: { template: string; wait?: boolean };
}

export const toolDeclarationSchema = z.strictObject({
  name: z.string().regex(/^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/, { error: 'must be a tool name: a letter, then letters, digits, _ or - (at most 64)' }),
  description: z.string().min(1).max(2000),
  spawn: z.strictObject({ template: z.string().min(1).max(64), wait: z.boolean().optional() }),
});

/** dagent's own tools, by name. */
export const DAGENT_TOOL_NAMES = ['read_input', 'spawn_subtasks', 'wait_subtasks', 'log'] as const;

export interface DagentToolsOptions {
  /**
   * The tools to offer, as a DAG's author lists them (`spec.input.tools`): names of dagent's tools (DAGENT_TOOL_NAMES)
   * and declarations of tools of the author's own (DagentToolDeclaration). Checked here: a bad entry is an
   * InvalidInputError naming its field. Default: dagent's tools, none of the author's.
   */
  offer?: unknown;
  /** The type of a subtask the model spawns without a template (the DAG's spawn policy decides whether it may). Default `llm`. */
  freeFormType?: string;
  /** Most characters of an upstream or subtask output handed back to the model in one tool result. Default 50,000. */
  resultChars?: number;
}

/** dagent's tools and what the tool loop needs to stop for a wait. */
export interface DagentTools {
  tools: ToolSet;
  /** True once the model asked to wait for subtasks that are not all complete: stop the loop (stopWhen) and call wait(). */
  waiting(): boolean;
  /**
   * End this attempt until the subtasks the model waits for have completed (ctx.spawn with wait: it throws to unwind).
   * Returns only when they all completed meanwhile, with their outputs: go on with the conversation so far and them
   * (running the loop again from the start would send its first requests again).
   */
  wait(): Promise<Array<{ key: string; status: string; output?: unknown }>>;
}

const RESULT_CHARS_DEFAULT = 50_000;

const subtaskInputSchema = {
  type: 'object',
  properties: {
    key: { type: 'string', description: 'a key for the subtask, unique under this task: lowercase letters, digits, _ and -' },
    template: { type: 'string', description: 'a template of the DAG to spawn from (it fixes what runs)' },
    title: { type: 'string' },
    prompt: { type: 'string', description: 'what the subtask should do' },
    input: { type: 'object', description: 'input fields (a template accepts only those it names)' },
    depends_on: { type: 'array', items: { type: 'string' }, description: 'keys of sibling subtasks it needs first' },
  },
  required: ['key'],
  additionalProperties: false,
} satisfies JSONSchema7;

type SubtaskInput = { key: string; template?: string; title?: string; prompt?: string; input?: Record<string, unknown>; depends_on?: string[] };

/**
 * dagent's tools for an AI SDK tool loop, bound to the task `ctx` runs:
 * - `read_input`: an upstream output (context refs) or a completed subtask's output, by name;
 * - `spawn_subtasks`: add subtasks within the DAG's spawn policy (templates, max_tasks, free_form), optionally waiting for them;
 * - `wait_subtasks`: wait for subtasks spawned earlier (all, or by key), then go on with their outputs;
 * - `log`: a line in the attempt's log;
 * - each tool the DAG's author declared: a spawn from its template.
 * A wait that cannot be answered at once stops the loop (`waiting()`); the caller then calls `wait()`, which ends the
 * attempt without counting as a failure. The task is claimed again once the subtasks completed; its model calls
 * (dagentModel) replay up to the wait, where the same spawn now answers with the subtasks' outputs.
 */
export function dagentTools(ctx: DagentToolsContext, options: DagentToolsOptions = {}): DagentTools {
  const { builtIn, declared } = toolsOffered(options.offer);
  const resultChars = options.resultChars ?? RESULT_CHARS_DEFAULT;
  let pending: SubtaskSpec[] | undefined;
  // What this attempt spawned, by key (each spawn is idempotent by key: a replayed loop spawns the same again), for wait_subtasks.
  const spawned = new Map<string, SubtaskSpec>();

  const shown = (v: unknown) => {
    const text = typeof v === 'string' ? v : JSON.stringify(v) ?? 'null';
    return text.length > resultChars ? `${text.slice(0, resultChars)}… [${text.length - resultChars} more characters]` : text;
  };
  const childrenShown = (children: SpawnedChild[]) => children.map((c) => ({
    key: c.key, status: c.status, ...(c.output === undefined ? {} : { output: shown(c.output) }),
  }));

  const spawn = async (specs: SubtaskSpec[], wait: boolean) => {
    const children = await ctx.spawn(specs);
    for (const s of specs) spawned.set(s.key, s);
    const done = children.every((c) => c.status === 'completed');
    if (wait && !done) {
      pending = [...(pending ?? []), ...specs];
      return { waiting: true, subtasks: childrenShown(children), note: 'this task will resume when they have completed' };
    }
    return { waiting: false, subtasks: childrenShown(children) };
  };

  const specOf = (s: SubtaskInput, template?: string): SubtaskSpec => ({
    key: s.key,
    ...(template ?? s.template ? { template: template ?? s.template } : { type: options.freeFormType ?? 'llm' }),
    ...(s.title === undefined ? {} : { title: s.title }),
    ...(s.prompt === undefined && s.input === undefined ? {} : { spec: { ...(s.prompt === undefined ? {} : { prompt: s.prompt }), ...(s.input === undefined ? {} : { input: s.input }) } }),
    ...(s.depends_on === undefined ? {} : { depends_on: s.depends_on }),
  });

  const names = () => [...Object.keys(ctx.inputs), ...Object.keys(ctx.children)];
  const all: ToolSet = {
    read_input: tool({
      description: 'Read the output of an upstream task this one depends on, or of a subtask it spawned that has completed, by name.',
      inputSchema: jsonSchema<{ name: string }>({ type: 'object', properties: { name: { type: 'string' } }, required: ['name'], additionalProperties: false }),
      execute: async ({ name }) => {
        if (Object.hasOwn(ctx.inputs, name)) return shown(ctx.inputs[name]);
        if (Object.hasOwn(ctx.children, name)) return shown(ctx.children[name]);
        throw new Error(`no input named ${JSON.stringify(name)}; the inputs are: ${names().join(', ') || 'none'}`);
      },
    }),
    spawn_subtasks: tool({
      description: 'Add subtasks to this task\'s DAG (within what its author allows). With wait: true, this task pauses until they have all completed and then continues with their outputs.',
      inputSchema: jsonSchema<{ subtasks: SubtaskInput[]; wait?: boolean }>({
        type: 'object',
        properties: { subtasks: { type: 'array', items: subtaskInputSchema, minItems: 1 }, wait: { type: 'boolean' } },
        required: ['subtasks'],
        additionalProperties: false,
      }),
      execute: async ({ subtasks, wait }) => spawn(subtasks.map((s) => specOf(s)), wait === true),
    }),
    wait_subtasks: tool({
      description: 'Pause this task until subtasks it spawned earlier have completed (all of them, or those named by key), then continue with their outputs.',
      inputSchema: jsonSchema<{ keys?: string[] }>({
        type: 'object', properties: { keys: { type: 'array', items: { type: 'string' }, minItems: 1 } }, additionalProperties: false,
      }),
      execute: async ({ keys }) => {
        const unknown = (keys ?? []).filter((k) => !spawned.has(k));
        if (unknown.length) throw new Error(`no subtask spawned with the keys ${unknown.join(', ')}; spawned: ${[...spawned.keys()].join(', ') || 'none'}`);
        const specs = keys ? keys.map((k) => spawned.get(k)!) : [...spawned.values()];
        if (specs.length === 0) throw new Error('no subtask was spawned: nothing to wait for');
        return spawn(specs, true);
      },
    }),
    log: tool({
      description: 'Write a line to this task\'s log, for the people running it.',
      inputSchema: jsonSchema<{ message: string }>({ type: 'object', properties: { message: { type: 'string' } }, required: ['message'], additionalProperties: false }),
      execute: async ({ message }) => {
        ctx.log.info({ tool: 'log' }, String(message).slice(0, 2000));
        return 'logged';
      },
    }),
  };
  const tools: ToolSet = Object.fromEntries(builtIn.map((n) => [n, all[n]!]));
  for (const d of declared) {
    const { template: _t, ...properties } = subtaskInputSchema.properties;
    tools[d.name] = tool({
      description: d.description,
      inputSchema: jsonSchema<SubtaskInput>({ ...subtaskInputSchema, properties }),
      execute: async (s) => spawn([specOf(s, d.spawn.template)], d.spawn.wait === true),
    });
  }

  return {
    tools,
    waiting: () => pending !== undefined,
    wait: async () => {
      if (!pending) throw new Error('dagentTools.wait(): the model asked to wait for nothing');
      const specs = pending;
      pending = undefined;
      // Unwinds unless every subtask completed meanwhile; then their outputs, for the caller to go on with.
      return childrenShown(await ctx.spawn(specs, { wait: true }));
    },
  };
}

/** The tools a list offers (`spec.input.tools`), checked; absent: dagent's own. */
export function toolsOffered(value: unknown): { builtIn: Array<(typeof DAGENT_TOOL_NAMES)[number]>; declared: DagentToolDeclaration[] } {
  if (value === undefined || value === null) return { builtIn: [...DAGENT_TOOL_NAMES], declared: [] };
  const entry = z.union([z.enum(DAGENT_TOOL_NAMES, { error: `must be one of ${DAGENT_TOOL_NAMES.join(', ')}, or a tool declaration {name, description, spawn}` }), toolDeclarationSchema]);
  const r = z.array(entry).max(32).safeParse(value);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new InvalidInputError(`spec.input.tools${issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('')}: ${issue.message}`, { field: 'spec.input.tools' });
  }
  const names = new Set<string>();
  for (const [i, t] of r.data.entries()) {
    const name = typeof t === 'string' ? t : t.name;
    if (names.has(name) || (typeof t !== 'string' && (DAGENT_TOOL_NAMES as readonly string[]).includes(name))) {
      throw new InvalidInputError(`spec.input.tools[${i}]: ${name} is named twice, or is the name of one of dagent's tools`, { field: 'spec.input.tools' });
    }
    names.add(name);
  }
  return {
    builtIn: r.data.filter((t): t is (typeof DAGENT_TOOL_NAMES)[number] => typeof t === 'string'),
    declared: r.data.filter((t): t is DagentToolDeclaration => typeof t !== 'string'),
  };
}
