// The public API: re-exports only. What is here, and why, is docs/api.md; everything
// else (claim buffers, batchers, loop constructors, query functions) is internal and may change.

// Agents: define one, run it in this process.
export { defineAgent, type AgentDefinition, type TaskContext } from './runtime/define-agent.js';
export { AgentRunner, type AgentRunnerOptions } from './runtime/agent-runner.js';
export { AgentFleet, type FleetMember } from './runtime/fleet.js';
export { RateLimitError, AuthFailureError, InvalidOutputError, NonRetryableError } from './runtime/task-errors.js';
export type { ClaimedTask, PreviousAttempt } from './engine/claim.js';
export type { SubtaskSpec } from './dag/subtask-spec.js';
export type { SpawnedChild } from './engine/spawn.js';

// The database: the embedded server, or DATABASE_URL's.
export { databaseOpen, type Database, type DatabaseOptions, type Db } from './db/connection.js';
export { configFromEnv, LEASE_DEFAULTS, type Config } from './config/index.js';

// DAGs: load a file, submit it, add edges to a live one.
export { dagFileLoad, dagSourceLoad, type LoadOptions } from './dag/load.js';
export type { DagSpec, TaskSpec, TaskBody, RetryPolicy } from './dag/spec.js';
export { dagSubmit, type SubmitOptions, type SubmitResult } from './engine/submit.js';
export { dagEdgesAdd, type EdgeByKey } from './engine/edges.js';

// The agent protocol, for a runtime of one's own (what AgentRunner and the HTTP API do).
export { agentRegister, agentBeat, agentDrain, agentDeregister, type AgentRegistration } from './engine/agents.js';
export { taskClaim, type ClaimOptions } from './engine/claim.js';
export { taskStart, taskHeartbeat, taskComplete, taskCompleteMany, taskRelease } from './engine/lifecycle.js';
export { taskFail, type Failure, type FailureOutcome } from './engine/failure.js';
export { taskSpawn, type SpawnOptions, type SpawnResult } from './engine/spawn.js';
export type { TaskRef } from './engine/guard.js';
export type { Completion } from './engine/completion.js';
export type { OutputOutcome } from './engine/output-settle.js';

// Operations: look, cancel, handle dead letters, run the maintenance loops.
export { dagStatus, taskShow, statsGet } from './engine/inspect.js';
export { taskCancel, dagCancel } from './engine/cancel.js';
export { dlqList, dlqShow, dlqRetry, dlqCancel } from './engine/dlq.js';
export { maintenanceServices, type MaintenanceService } from './maintenance/index.js';
export { prune, prunePreview, type PruneOptions, type PruneCounts, type RetentionPreview } from './engine/retention.js';
export { traceEmitterStart, type TraceEmitter } from './observability/tracing.js';
export { dagentIdGenerator, attemptTraceparent, dagTraceId } from './observability/trace-ids.js';

// Validators: what a validation agent returns.
export { verdictSchema, judgeAnswerSchema, verdictParse, type Verdict, type StepVerdict } from './validation/verdict.js';
export type { ValidationStep } from './validation/steps/index.js';

// The state machine, and every error with its code.
export { TASK_STATES, TRANSITIONS, type TaskState } from './model/state-machine.js';
export * from './errors.js';
