import type { Db } from '../../db/handle.js';
import { agentGet } from '../../db/queries/agents.js';
import { taskClaimReady } from '../../db/queries/tasks-claim.js';
import type { ClaimedRow, PreviousAttempt } from '../../db/rows.js';

export type { PreviousAttempt } from '../../db/rows.js';
import { LEASE_DEFAULTS } from '../../config/index.js';
import type { TaskBody, TaskOrigin } from '../../dag/spec.js';
import { NotFoundError, InvalidInputError } from '../../errors.js';
import { modelsForAttempt } from './retry-policy.js';
import { engineEvents } from '../../observability/engine-events.js';
import { attemptTraceparent } from '../../observability/trace-ids.js';

/** A task as an agent receives it from a claim. */
export interface ClaimedTask {
  id: string;
  dagId: string;
  key: string;
  type: string;
  title: string | null;
  /** The fencing token: present it to start, heartbeat, complete, fail and release. */
  fence: number;
  attempt: number;
  maxAttempts: number;
  leaseExpiresAt: Date;
  spec: TaskBody;
  /**
   * The model to run this attempt on: the first of the attempt's models the agent has (see modelsForAgent).
   * Null when the task names no model.
   */
  model: string | null;
  /** The models this attempt may use that the agent has, in the task's order of preference (`model` first). */
  models: string[];
  /** Upstream outputs named by the task's context refs, keyed by the ref (`plan`, `plan.outline`). */
  inputs: Record<string, unknown>;
  /** Outputs of the completed subtasks this task spawned, by their key (see taskSpawn). */
  children: Record<string, unknown>;
  maxDurationSec: number | null;
  /** Heartbeat interval while running; the lease lasts LEASE_DEFAULTS.beatsPerLease beats. */
  heartbeatSec: number;
  maxCostUsd: number | null;
  /** True when the claim already started the task (`start: true`): no taskStart needed. */
  started: boolean;
  /**
   * Who wrote the spec: `dag` (a DAG's author), `template` (an agent filled in a template's
   * data fields), `agent` (an agent wrote it all), `validation` (the engine, for a step).
   * An agent that executes what a task says must not run what an agent wrote (see agents/shell.ts).
   */
  origin: TaskOrigin;
  outputSpec: Record<string, unknown> | null;
  /**
   * On a retry, the latest failed attempts (up to PREVIOUS_ATTEMPTS_MAX, oldest first): error class and
   * message, the output validation rejected and each validator's verdict, so the agent can do better.
   */
  previousAttempts: PreviousAttempt[];
  /**
   * The W3C trace context of this attempt (`00-<trace>-<span>-01`): the DAG's trace, the attempt's span. An agent's own
   * spans started under it nest under the attempt's span in dagent's trace (docs/operations.md#traces).
   */
  traceparent: string;
}

export interface ClaimOptions {
  /** Most tasks to claim. Default 1. */
  limit?: number;
  /** Seconds the agent has to start a claimed task. Default LEASE_DEFAULTS.claimTtlSec. */
  claimTtlSec?: number;
  /**
   * The agent's capabilities, when the caller already knows them (saves a read per
   * claim). Claims nothing unless they are a subset of the agent's registered ones.
   */
  capabilities?: readonly string[];
  /** Only claim tasks of this DAG. Default: any DAG. */
  dagId?: string;
  /** Claim straight into RUNNING under the heartbeat lease (no separate start): for claimers that start what they claim at once. */
  start?: boolean;
  /** The claiming token's grant: at most this many tasks held at once, and this much spent, whatever the agent row says. */
  grant?: { maxHeld: number | null; budgetUsd: number | null; tenants?: readonly string[] | null };
}

/** Claim up to `limit` tasks the agent is capable of and can afford, most urgent first. */
export async function taskClaim(db: Db, agentId: string, opts: ClaimOptions = {}): Promise<ClaimedTask[]> {
  const limit = opts.limit ?? 1;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InvalidInputError(`claim limit must be 1..1000, got ${limit}`);
  let capabilities = opts.capabilities;
  if (!capabilities) {
    const agent = await agentGet(db, agentId);
    if (!agent) throw new NotFoundError('agent', agentId);
    capabilities = agent.capabilities;
  }
  const { rows, previousAttempts, agentActive } = await taskClaimReady(db, agentId, capabilities, limit, opts.claimTtlSec ?? LEASE_DEFAULTS.claimTtlSec, { dagId: opts.dagId, start: opts.start, grant: opts.grant });
  // An unknown agent is an error; one that is not active (paused, draining, offline) claims nothing. The claim saw an
  // active row, so no read is needed: an agent woken with others by a NOTIFY that another one's claim answered
  // first used to read its row after every empty claim (78-82 of 750 claims in a makespan run of 8 agents).
  if (rows.length === 0 && opts.capabilities && !agentActive && !(await agentGet(db, agentId))) throw new NotFoundError('agent', agentId);
  engineEvents.emit('claim', { agentId, requested: limit, claimed: rows.map((r) => ({ type: r.type, waitSec: r.waitSec })) });
  return rows.map((r) => claimedTaskOf(r, previousAttempts.get(r.id) ?? [], r.agentModels, r.pausedModels, opts.start === true));
}

/**
 * A claimed row as the agent receives it (a claim's, or a completion's hand-off: engine/attempt/completion.ts), with the
 * task's earlier failures and the agent's models and the fleet's paused ones passed beside the row, not copied in.
 */
export function claimedTaskOf(
  r: Omit<ClaimedRow, 'waitSec' | 'agentModels' | 'pausedModels'>, previousAttempts: PreviousAttempt[],
  agentModels: readonly string[], pausedModels: readonly string[], started: boolean,
): ClaimedTask {
  const spec = r.spec as unknown as TaskBody;
  // A paused model (a provider's rate limit, a declared limit spent) is never the one to use while another the
  // task accepts is free; the one a declared limit reserved for is handed out first.
  const free = modelsForAgent(spec, r.attempt, agentModels).filter((m) => !modelPaused(m, pausedModels));
  const models = r.rateModel ? [r.rateModel, ...free.filter((m) => m !== r.rateModel)] : free;
  return {
    id: r.id,
    dagId: r.dagId,
    key: r.key,
    type: r.type,
    title: r.title,
    fence: r.fence,
    attempt: r.attempt,
    maxAttempts: r.maxAttempts,
    leaseExpiresAt: r.leaseExpiresAt,
    spec,
    model: models[0] ?? null,
    models,
    inputs: contextResolve(spec.context, r.upstreamOutputs),
    children: r.childOutputs,
    maxDurationSec: r.maxDurationSec,
    heartbeatSec: r.heartbeatSec ?? LEASE_DEFAULTS.heartbeatSec,
    maxCostUsd: r.maxCostUsd,
    started,
    origin: r.origin,
    outputSpec: r.outputSpec,
    previousAttempts,
    traceparent: attemptTraceparent(r.dagId, r.id, r.fence),
  };
}

/**
 * The models an attempt may use on this agent, best first: the attempt's own list (modelsForAttempt:
 * the fallback models from retry 2 on), then the task's other accepted models, keeping those the agent
 * has (`*`: all). The claim took the task only if one is left, unless the task names none.
 */
export function modelsForAgent(body: Pick<TaskBody, 'models' | 'fallbackModels'>, attempt: number, agentModels: readonly string[]): string[] {
  const preferred = modelsForAttempt(body, attempt);
  const all = [...new Set([...preferred, ...body.models, ...body.fallbackModels])];
  return agentModels.includes('*') ? all : all.filter((m) => agentModels.includes(m));
}

/**
 * Whether an attempt could have used `model`: one the task accepts (its models and fallbacks) that the agent registered
 * (`*`: any), or, for a task that names none, one the agent registered. What an agent reports it used must be one.
 */
export function modelUsable(model: string, taskModels: readonly string[], agentModels: readonly string[]): boolean {
  const agentHas = agentModels.includes('*') || agentModels.includes(model);
  return agentHas && (taskModels.length === 0 || taskModels.includes(model));
}

/** The refusal of a reported model its attempt could not use (modelUsable), naming `field`; none when it could. */
export function modelUnusableError(field: string, model: string, taskModels: readonly string[], agentModels: readonly string[]): InvalidInputError | null {
  if (modelUsable(model, taskModels, agentModels)) return null;
  const could = taskModels.length ? `the task accepts ${taskModels.join(', ')}` : 'the task names no model';
  return new InvalidInputError(`${field}: ${model} is not a model this attempt could use (${could}; the agent registered ${agentModels.join(', ') || 'none'})`, { model });
}

/** A model is paused when it is, or its provider (`openai` for `openai/gpt-4o`) is. */
export function modelPaused(model: string, paused: readonly string[]): boolean {
  return paused.includes(model) || paused.includes(model.split('/')[0]!);
}

/** `plan` → plan's whole output; `plan.outline.title` → that path inside it (undefined if absent). */
export function contextResolve(refs: string[], outputs: Record<string, unknown>): Record<string, unknown> {
  const inputs: Record<string, unknown> = {};
  for (const ref of refs) {
    const [key, ...path] = ref.split('.');
    // Own properties only: a ref like plan.constructor finds the output's field, never Object's.
    let v: unknown = Object.hasOwn(outputs, key!) ? outputs[key!] : undefined;
    for (const p of path) v = v && typeof v === 'object' && Object.hasOwn(v, p) ? (v as Record<string, unknown>)[p] : undefined;
    inputs[ref] = v;
  }
  return inputs;
}
