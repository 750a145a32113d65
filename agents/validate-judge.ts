import {
  defineAgent, judgeAnswerSchema, NonRetryableError, TaskError, type ValidationStep, type Verdict,
} from '../src/index.js';
import { llmCall, llmConfigProblem, modelsFromEnv, previousAttemptsText, type ChatMessage } from './llm.js';

type JudgeStep = Extract<ValidationStep, { kind: 'llm-judge' }>;
interface JudgeInput { step: JudgeStep; output: unknown; subject: { key: string; title: string | null; prompt: string | null } }

/** Most characters of the judged output sent to the model. */
const MAX_OUTPUT_CHARS = 60_000;

/**
 * Runs `llm-judge` validation steps with the llm agent's model call (any of its providers):
 * the model scores the output against the rubric and must answer
 * {"pass", "score", "reasons"}. An answer that is not that JSON is a crashed
 * validation (error class judge_invalid_answer, retried); the engine applies
 * the step's threshold to the score. Model: the step's, else DAGENT_JUDGE_MODEL, else DAGENT_LLM_MODEL.
 */
export default defineAgent({
  name: 'validate-judge',
  capabilities: ['validate:judge'],
  // The models it judges with (comma-separated, read at load); default any the step or its task names.
  models: modelsFromEnv(process.env.DAGENT_JUDGE_MODELS),
  maxConcurrent: 4,
  // A judge without its provider's key does not start: the DAGs that need it are then refused at submit.
  preflight: () => llmConfigProblem(process.env, modelsFromEnv(process.env.DAGENT_JUDGE_MODELS)),
  async run(task, ctx): Promise<Verdict> {
    // Only the engine's validation tasks: a rubric an agent wrote is no judgement of the DAG author's.
    if (task.origin !== 'validation') throw new NonRetryableError(`task ${task.key} is not a validation task (origin ${task.origin})`, { errorClass: 'untrusted_spec' });
    const { step, output, subject } = task.spec.input as unknown as JudgeInput;
    if (step?.kind !== 'llm-judge') throw new TaskError('bad_input', 'spec.input.step must be an llm-judge step', { retryable: false });
    const model = task.model ?? process.env.DAGENT_JUDGE_MODEL ?? process.env.DAGENT_LLM_MODEL;
    if (!model) throw new NonRetryableError('no judge model: the step names none and neither DAGENT_JUDGE_MODEL nor DAGENT_LLM_MODEL is set', { errorClass: 'config' });
    const { text } = await llmCall(model, judgeMessages(step, output, subject, previousAttemptsText(task.previousAttempts)), ctx);
    const answer = judgeAnswerParse(text);
    return { pass: answer.score >= step.threshold, score: answer.score, reasons: answer.reasons, model };
  },
});

/**
 * The judge's prompt. `previous`: what went wrong with earlier answers (an answer that was no verdict), so a retry
 * asks anew rather than replaying the recorded call (dagentModel replays only the same request).
 */
export function judgeMessages(step: JudgeStep, output: unknown, subject: JudgeInput['subject'], previous?: string): ChatMessage[] {
  const shown = typeof output === 'string' ? output : JSON.stringify(output, null, 2);
  return [
    {
      role: 'system',
      content: 'You are a strict reviewer. Score the output against the rubric from 0 (fails it entirely) to 1 (meets it fully). '
        + 'Answer with one JSON object and nothing else: {"pass": boolean, "score": number between 0 and 1, "reasons": [short strings]}.',
    },
    {
      role: 'user',
      content: [
        `Rubric:\n${step.rubric}`,
        `Task: ${subject.title ?? subject.key}${subject.prompt ? `\nIts instructions:\n${subject.prompt}` : ''}`,
        `Output to judge:\n${shown.length > MAX_OUTPUT_CHARS ? `${shown.slice(0, MAX_OUTPUT_CHARS)}\n[… truncated]` : shown}`,
        ...(previous ? [previous] : []),
      ].join('\n\n'),
    },
  ];
}

/** The model's answer as {pass, score, reasons}; a code fence around it is tolerated, anything else is an error to retry. */
export function judgeAnswerParse(text: string) {
  const body = text.trim().replace(/^```(?:json)?\s*([\s\S]*?)\s*```$/, '$1');
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new TaskError('judge_invalid_answer', `judge answer is not JSON: ${text.slice(0, 300)}`);
  }
  const r = judgeAnswerSchema.safeParse(parsed);
  if (!r.success) {
    throw new TaskError('judge_invalid_answer', `judge answer is not a verdict: ${r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  }
  return r.data;
}
