// dagent/ai-sdk: the AI SDK made durable, streamed and budgeted for a dagent task (docs/agents.md, "AI SDK agents").
// A subpath of its own so `import 'dagent'` never loads the AI SDK.
export {
  dagentMiddleware, dagentModel, dagentModelName, LLM_CALL_TIMEOUT_MS_DEFAULT, LLM_IDLE_TIMEOUT_MS_DEFAULT, type DagentModelContext, type DagentModelOptions,
} from './model.js';
export { DAGENT_TOOL_NAMES, dagentTools, type DagentTools, type DagentToolsOptions, type DagentToolDeclaration } from './tools.js';
export {
  CONTEXT_LENGTH_CLASS, ContextLengthError, llmHttpError, llmSdkError, llmStreamError, REFUSAL_CLASS, RefusalError, retryAfterSec,
} from './errors.js';
export {
  LLM_MAX_OUTPUT_TOKENS_DEFAULT, llmCallEstimate, llmPromptChars, llmUsageOf, llmUsageOrEstimate, type LlmCallEstimate, type LlmCallUsage,
} from './usage.js';
