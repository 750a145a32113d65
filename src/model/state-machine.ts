import { IllegalTransitionError } from '../errors.js';

/**
 * The task state machine, defined once. Every UPDATE that changes `tasks.status`
 * takes its guard (`status = any(from)`) from here, so an illegal transition
 * changes no row and is reported by `assertTransition`.
 */
export const TASK_STATES = [
  'created', // inserted so, only when it waits for a signal (wait_for, approval, for_each); the same transaction moves it on
  'pending', // waiting on dependencies (or on its not_before time); a task is inserted PENDING or READY (taskInsertMany)
  'ready', // claimable
  'claimed', // leased by an agent, not yet started
  'running', // started, kept alive by heartbeats
  'validating', // output submitted, validation in progress
  'waiting', // no agent runs it: it waits for a signal (wait_for) until one comes or its timeout lapses
  'completed', // also inserted so: a task a rerun with a change carried over, with its original output (tasks.reused_from)
  'failed', // transient: the retry policy moves it on in the same transaction
  'retrying', // waiting for run_at, then promoted to ready
  'dead_lettered', // waiting for a human
  'cancelled',
] as const;
export type TaskState = (typeof TASK_STATES)[number];

/** States in which an agent holds the task under a lease and a fencing token. */
export const LEASED_STATES: readonly TaskState[] = ['claimed', 'running', 'validating'];

/**
 * Leased states whose lease can lapse, which the reaper watches. A VALIDATING
 * task dropped its lease when its output was submitted: the validation task that
 * judges it holds one of its own. The partial index `tasks_lease_idx` covers exactly these.
 */
export const EXPIRING_LEASE_STATES = ['claimed', 'running'] as const satisfies readonly TaskState[];

/**
 * States in which a task counts against its agent's max_concurrent: leased, or its output under
 * validation (the agent's work is not done until the verdict). The partial index `tasks_held_idx` covers these.
 */
export const HELD_STATES = ['claimed', 'running', 'validating'] as const satisfies readonly TaskState[];

interface TransitionDef {
  from: readonly TaskState[];
  to: readonly TaskState[];
  /** Who performs it: documents which component moves a task out of each state. */
  by: string;
}

export const TRANSITIONS = {
  activate: { from: ['created'], to: ['pending', 'ready'], by: 'submit / spawn' },
  unblock: { from: ['pending'], to: ['ready'], by: 'completion of the last upstream task; promoter for not_before' },
  block: { from: ['created', 'pending', 'ready'], to: ['pending'], by: 'edge insertion: an unclaimed task gains an unfinished upstream' },
  // A task that waits for a signal (wait_key) never sits in READY: in the statement that would make it READY,
  // the trigger tasks_await (migration 0022) makes it WAITING instead, as if claimed by no agent: a new fence and
  // attempt, its wait_for timeout as its lease. So every path to READY (unblock, promote, retry, dlq retry) waits again.
  await: { from: ['created', 'pending', 'retrying', 'dead_lettered', 'failed'], to: ['waiting'], by: 'the tasks_await trigger, instead of becoming ready' },
  claim: { from: ['ready'], to: ['claimed', 'running'], by: 'agent claim (running at once when the claimer starts what it claims: the agent runtime)' },
  start: { from: ['claimed'], to: ['running'], by: 'agent' },
  heartbeat: { from: ['claimed', 'running'], to: ['claimed', 'running'], by: 'agent' },
  submitOutput: { from: ['claimed', 'running'], to: ['validating'], by: 'agent (when output validation is declared)' },
  complete: { from: ['claimed', 'running', 'validating', 'waiting'], to: ['completed'], by: 'agent / validation / a signal' },
  fail: { from: ['claimed', 'running', 'validating', 'waiting'], to: ['failed'], by: 'agent, reaper, waits (timeout)' },
  release: { from: ['claimed', 'running'], to: ['ready'], by: 'agent shutdown (no attempt consumed)' },
  rateLimit: { from: ['claimed', 'running'], to: ['retrying'], by: 'agent reporting a provider rate limit (no attempt consumed; ready again after the Retry-After)' },
  waitForChildren: { from: ['claimed', 'running'], to: ['pending'], by: 'agent spawning subtasks with wait (no attempt consumed)' },
  mapWait: { from: ['waiting'], to: ['pending'], by: 'the waits loop adding a for_each task\'s children: it waits for them (no attempt consumed)' },
  scheduleRetry: { from: ['failed'], to: ['retrying', 'ready'], by: 'retry policy, same transaction as fail' },
  deadLetter: { from: ['failed'], to: ['dead_lettered'], by: 'retry policy, same transaction as fail' },
  promote: { from: ['retrying', 'pending'], to: ['ready'], by: 'promoter (run_at reached)' },
  dlqRetry: { from: ['dead_lettered'], to: ['ready', 'pending'], by: 'human (dlq retry)' },
  rerun: { from: ['completed', 'dead_lettered', 'cancelled'], to: ['pending'], by: 'human (task rerun, dag rerun): then ready once its upstream tasks are done' },
  cancel: {
    from: ['created', 'pending', 'ready', 'claimed', 'running', 'validating', 'waiting', 'failed', 'retrying', 'dead_lettered'],
    to: ['cancelled'],
    by: 'human, or cascade from a cancelled upstream',
  },
} as const satisfies Record<string, TransitionDef>;
export type Transition = keyof typeof TRANSITIONS;

export function fromStates(t: Transition): readonly TaskState[] {
  return TRANSITIONS[t].from;
}

export function assertTransition(taskId: string, t: Transition, actual: string): void {
  if (!(TRANSITIONS[t].from as readonly string[]).includes(actual)) {
    throw new IllegalTransitionError(taskId, t, actual, TRANSITIONS[t].from);
  }
}

export const DAG_STATES = ['running', 'completed', 'blocked', 'cancelled'] as const;
export type DagState = (typeof DAG_STATES)[number];
