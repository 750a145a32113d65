import type { Logger } from 'pino';
import { z } from 'zod';
import { capabilitySchema, KEY_PATTERN } from '../dag/file-schema.js';
import { agentModelSchema } from '../llm-models.js';
import type { SubtaskSpec } from '../dag/subtask-spec.js';
import type { ClaimedTask } from '../engine/attempt/claim.js';
import type { SpawnedChild } from '../engine/dag/spawn.js';
import { InvalidInputError } from '../errors.js';
import { tenantIdSchema } from '../config/index.js';
import type { StepOptions } from './attempt-steps.js';
import type { BudgetView, CallEstimate } from './attempt-usage.js';
import type { StreamWriter } from './attempt-streams.js';
import type { Workspace } from './attempt-workspace.js';

/** What a handler gets besides its task: inputs, liveness, subtasks and cost reporting. */
export interface TaskContext {
  agentId: string;
  /**
   * This attempt's W3C trace context (`traceparent`): the handler already runs in it, so spans it starts with
   * @opentelemetry/api nest under the attempt; pass it on to services it calls (an LLM gateway) to join their spans.
   */
  traceparent: string;
  /** Upstream outputs named by the task's context refs (`research`, `plan.outline`). */
  inputs: Record<string, unknown>;
  /** Outputs of subtasks this task spawned that have completed, by their key. */
  children: Record<string, unknown>;
  /** Aborted when the task passes max_duration_sec, loses its lease, passes its worktree's size cap, or the agent shuts down. */
  signal: AbortSignal;
  log: Logger;
  /** Record progress; the runtime also heartbeats on its own every heartbeat_sec. */
  heartbeat(progress?: { progress?: number; message?: string }): Promise<void>;
  /**
   * Add subtasks to this task's DAG. With `wait: true` this attempt ends
   * (without counting as a failure) and the task is claimed again once they all
   * completed: write the handler as a resumable step that spawns the same keys
   * again; on the rerun spawn returns at once with their outputs.
   */
  spawn(specs: SubtaskSpec[], opts?: { wait?: boolean }): Promise<SpawnedChild[]>;
  /**
   * Add to the cost of this attempt: written (the ledger keeps input, output, cache-read and cache-write tokens apart) and charged to the task, its DAG and this agent within a few milliseconds
   * (so a crash keeps it), and held to the attempt's limits (its max_cost_usd, its DAG's and its agent's budgets).
   * Resolves once durable with what is left; a report past a limit stops the attempt (`ctx.signal` aborts with reason
   * budget_exceeded, and the attempt fails with that class). Awaiting it is optional; a handler that calls a paid API
   * in a loop awaits it, so it never makes a call after the one that reached the limit. docs/agents.md.
   */
  reportCost(cost: {
    /** USD since the last report (omitted: 0); null: cost unknown (no price for the model): kept and shown as unknown, never as 0. */
    usd?: number | null;
    /** `input` counts every input token; `cachedRead` and `cacheWrite` say how many of them the provider's cache served and took. */
    tokens?: { input?: number; output?: number; cachedRead?: number; cacheWrite?: number };
    model?: string;
  }): Promise<BudgetView | null>;
  /** Where the attempt stands against its limits, as the last report's answer or budgetFits' read said (before either: no limits known). */
  readonly budget: BudgetView;
  /** Called once, when a report's answer first says the attempt has spent 80 % or more of a limit: time to wrap up. */
  onBudgetLow(listener: (budget: BudgetView) => void): void;
  /**
   * Before a paid call: whether one estimated to cost `estimate` (USD, or `{ usd, tokens }` with tokens in + out)
   * fits under every limit (what was reported is charged first). A handler that asks before each call stops before
   * the call that would pass its limit: with estimates that hold, it never passes it. False once the attempt was
   * stopped or its lease lost.
   */
  budgetFits(estimate: CallEstimate): Promise<boolean>;
  /**
   * A durable step: if a step of this name was recorded for the task (by an earlier attempt), its result is returned
   * without calling `fn` ("step replayed" in the attempt's log); else `fn` runs and its JSON result is recorded under
   * this attempt's fence, then returned. A step that throws records nothing. Spend reported inside `fn` is recorded
   * with the step; a replay charges nothing. Names are 1-200 printable characters, each used once per attempt;
   * results at most LIMITS.stepResultBytes as JSON, at most LIMITS.stepsPerTask steps a task. `scope: 'attempt'`:
   * run afresh in each attempt (recorded for visibility, never replayed). docs/agents.md, "Durable steps".
   */
  step<T>(name: string, fn: () => Promise<T> | T, options?: StepOptions): Promise<T>;
  /**
   * A stream of this attempt (default `output`): what `write` gets (text, appended; or a JSON value) is durable
   * within STREAM_DEFAULTS.batchMs and readable live and afterwards (GET /api/tasks/:id/streams/:name as
   * server-sent events, `dagent stream`, the dashboard), each attempt's kept apart. The same name returns the same
   * writer. docs/agents.md, "Streams".
   */
  stream(name?: string): StreamWriter;
  /**
   * The attempt's git worktree when the task declares a `workspace` (null otherwise): its path, its branch
   * (dagent/<dag id>/<task key>) and the commit it started from. Work there; what is left uncommitted when the
   * handler returns is committed, and the output records the branch, its head and the diff's stat. A validation
   * task (a test step) gets the worktree of the attempt whose output it judges, when it is on this machine.
   * docs/coding-agents.md.
   */
  readonly workspace: Workspace | null;
}

export interface AgentDefinition {
  /** The agent type, also the default id prefix. */
  name: string;
  /** The agent claims only tasks whose required capabilities are all in this list. */
  capabilities: string[];
  /**
   * Models it can use: it claims only tasks that name none or one of these, and receives the model to use
   * (`task.model`). `*` takes any model. Default none: only tasks that name no model.
   */
  models?: string[];
  /** The tenants whose work it takes (docs/priority.md, "Tenants and fair share"). Default every tenant's. */
  tenants?: string[];
  /** Total spend allowed across its lifetime, in USD. Default unlimited. */
  budgetUsd?: number;
  /** Most it may spend in one UTC day, in USD: past it its running attempt is stopped and it claims nothing until the next day. Default none. */
  dailyBudgetUsd?: number;
  /** Tasks run at once. Default 1. */
  maxConcurrent?: number;
  /** Do the task; the return value is its output (any JSON value). Throw a TaskError to choose the error class. */
  run(task: ClaimedTask, ctx: TaskContext): Promise<unknown>;
  /**
   * Checked when the agent starts, before it registers: a message says why it cannot work in this process (a
   * provider's API key is missing), and the agent does not start, so it never claims a task it would fail and
   * the submit-time checks (a judge for each llm-judge step) do not count it. Undefined: ready.
   */
  preflight?(): string | undefined | Promise<string | undefined>;
}

const definitionSchema = z.object({
  name: z.string().regex(KEY_PATTERN, { error: 'must match ^[a-z][a-z0-9_-]*$ (max 64 chars)' }),
  capabilities: z.array(capabilitySchema).max(64),
  models: z.array(agentModelSchema).max(32).optional(),
  tenants: z.array(tenantIdSchema).min(1).max(1000).optional(),
  budgetUsd: z.number().nonnegative().optional(),
  dailyBudgetUsd: z.number().nonnegative().optional(),
  maxConcurrent: z.number().int().min(1).max(1000).optional(),
  run: z.custom<AgentDefinition['run']>((v) => typeof v === 'function', { error: 'must be a function (task, ctx) => output' }),
  preflight: z.custom<NonNullable<AgentDefinition['preflight']>>((v) => typeof v === 'function', { error: 'must be a function () => problem or undefined' }).optional(),
});

/** Declare an agent; checks the definition now, so a typo fails at load, not at the first task. */
export function defineAgent(def: AgentDefinition): AgentDefinition {
  const parsed = definitionSchema.safeParse(def);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new InvalidInputError(`agent definition${def?.name ? ` ${def.name}` : ''}: ${issue.path.join('.') || 'definition'}: ${issue.message}`);
  }
  return Object.freeze({ ...def });
}
