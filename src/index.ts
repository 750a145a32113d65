// The public API: re-exports only. What is here, and why, is docs/api.md; everything
// else (claim buffers, batchers, loop constructors, query functions) is internal and may change.

// Agents: define one, run it in this process.
export { defineAgent, type AgentDefinition, type TaskContext } from './runtime/define-agent.js';
export type { Workspace, WorkspaceSummary } from './runtime/attempt-workspace.js';
export { mergeQueueRun, type MergeQueueOptions, type MergeQueueOutput, type MergeTestRunner } from './runtime/merge-queue.js';
export type { MergeConflict, MergeOutcome, MergeTestResult } from './workspaces/merge.js';
export type { BudgetView, CallEstimate } from './runtime/attempt-usage.js';
export type { StreamWriter } from './runtime/attempt-streams.js';
export type { LimitReached, UsageLimitName } from './engine/attempt/usage-limits.js';
export { AgentRunner, type AgentRunnerOptions } from './runtime/agent-runner.js';
export { AgentFleet, type FleetMember } from './runtime/fleet.js';
export { RateLimitError, AuthFailureError, InvalidOutputError, NonRetryableError } from './runtime/task-errors.js';
export { BUDGET_EXCEEDED_CLASS } from './engine/attempt/retry-policy.js';
// What models cost: the price data (@pydantic/genai-prices), DAGENT_LLM_PRICES over it, the cost of a call.
export { llmListedPrice, llmPrices, llmPriceOf, llmCost, type LlmListedPrice, type LlmPrice, type LlmUsage } from './llm-prices.js';
export type { ClaimedTask, PreviousAttempt } from './engine/attempt/claim.js';
export type { SubtaskSpec } from './dag/subtask-spec.js';
export type { SpawnedChild } from './engine/dag/spawn.js';

// The database: the embedded server, or DATABASE_URL's.
export { databaseOpen, type Database, type DatabaseOptions, type Db } from './db/open.js';
export { configFromEnv, LEASE_DEFAULTS, type Config } from './config/index.js';

// DAGs: load a file, submit it, add edges to a live one.
export { dagFileLoad, dagSourceLoad, type LoadOptions } from './dag/load.js';
export type { DagSpec, TaskSpec, TaskBody, RetryPolicy } from './dag/spec.js';
export { dagSubmit, type SubmitOptions, type SubmitResult } from './engine/dag/submit.js';
export { dagEdgesAdd, type EdgeByKey } from './engine/dag/edges.js';

// The agent protocol, for a runtime of one's own (what AgentRunner and the HTTP API do).
export { agentRegister, agentBeat, agentDrain, agentDeregister, type AgentRegistration } from './engine/ops/agents.js';
export { taskClaim, type ClaimOptions } from './engine/attempt/claim.js';
export { taskStart, taskHeartbeat } from './engine/attempt/lease.js';
export { taskComplete, taskCompleteMany } from './engine/attempt/complete.js';
export { taskRelease } from './engine/attempt/release.js';
export { taskFail, type Failure, type FailureOutcome } from './engine/attempt/fail.js';
export { taskSpawn, type SpawnOptions, type SpawnResult } from './engine/dag/spawn.js';
export type { TaskRef } from './engine/attempt/refusal.js';
export type { Completion } from './engine/attempt/completion-write.js';
export type { OutputOutcome } from './engine/attempt/settle.js';

// Operations: look, cancel, handle dead letters, run the maintenance loops.
export { dagStatus, taskShow, statsGet } from './engine/read/inspect.js';
export { taskCancel, dagCancel } from './engine/dag/cancel.js';
export { dlqList, dlqShow, dlqRetry, dlqCancel } from './engine/ops/dlq.js';
export { maintenanceServices, LOOP_NAMES, type MaintenanceService } from './maintenance/index.js';
export { nodeStart, type NodeOptions, type DagentNode } from './node.js';
export { prune, prunePreview, type PruneOptions, type PruneCounts, type RetentionPreview } from './engine/ops/retention.js';
export { traceEmitterStart, type TraceEmitter } from './observability/tracing.js';
export { dagentIdGenerator, attemptTraceparent, dagTraceId } from './observability/trace-ids.js';

// Validators: what a validation agent returns.
export { verdictSchema, judgeAnswerSchema, verdictParse, type Verdict, type StepVerdict } from './validation/verdict.js';
export type { ValidationStep } from './validation/steps/index.js';

// The state machine, and every error with its code.
export { TASK_STATES, TRANSITIONS, type TaskState } from './model/state-machine.js';
export * from './errors.js';
