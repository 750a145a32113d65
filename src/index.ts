// The public API: re-exports only.
export { databaseOpen, migrationsApply, withTx, type Database, type DatabaseOptions, type Db } from './db/connection.js';
export { configFromEnv, LEASE_DEFAULTS, type Config } from './config/index.js';
export { dagFileLoad, dagSourceLoad, type LoadOptions } from './dag/load.js';
export type { DagSpec, TaskSpec, TaskBody, RetryPolicy } from './dag/spec.js';
export { dagSubmit, type SubmitOptions, type SubmitResult } from './engine/submit.js';
export { dagEdgesAdd, type EdgeByKey } from './engine/edges.js';
export { agentRegister, agentBeat, agentDrain, agentDeregister, type AgentRegistration } from './engine/agents.js';
export { taskClaim, type ClaimedTask, type ClaimOptions } from './engine/claim.js';
export {
  taskStart, taskHeartbeat, taskComplete, taskCompleteMany, taskFail, taskRelease,
  type Completion, type Failure, type FailureOutcome, type TaskRef,
} from './engine/lifecycle.js';
export { taskCancel, dagCancel } from './engine/cancel.js';
export { dlqList, dlqShow, dlqRetry, dlqCancel } from './engine/dlq.js';
export { dagStatus, taskShow, statsGet } from './engine/inspect.js';
export { TASK_STATES, TRANSITIONS, type TaskState } from './model/state-machine.js';
export { retryDecide, retryDelaySec, POISON_PILL } from './engine/retry-policy.js';
export { maintenanceServices, reaperCreate, promoterCreate, type MaintenanceService } from './maintenance/index.js';
export { ClaimBuffer } from './runtime/claim-buffer.js';
export { CompletionBatcher } from './runtime/completion-batcher.js';
export * from './errors.js';
export { taskSpawn, type SpawnOptions, type SpawnResult, type SpawnedChild } from './engine/spawn.js';
export type { SubtaskSpec } from './dag/subtask-spec.js';
export { defineAgent, type AgentDefinition, type TaskContext } from './runtime/define-agent.js';
export { AgentRunner, type AgentRunnerOptions } from './runtime/agent-runner.js';
export { ReadyListener } from './runtime/ready-listener.js';
export { TaskError, RateLimitError, AuthFailureError, InvalidOutputError, NonRetryableError } from './runtime/task-errors.js';
export { taskOutputSettle, VALIDATION_TASK_DEFAULTS, type OutputOutcome } from './engine/validation.js';
export { verdictSchema, judgeAnswerSchema, verdictParse, type Verdict, type StepVerdict } from './validation/verdict.js';
export type { ValidationStep } from './validation/steps/index.js';
