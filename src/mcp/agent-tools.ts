import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { ClaimedTask } from '../engine/attempt/claim.js';
import { reportFailure, reportLogLine, reportProgress, reportSpend, spendOfReport } from '../wire/reports.js';
import { capabilitySchema } from '../dag/file-schema.js';
import { agentModelSchema } from '../llm-models.js';
import { LIMITS } from '../config/index.js';
import { STEP_SCOPES } from '../model/step-scopes.js';
import { STEP_NAME_MAX } from '../engine/attempt/steps.js';
import type { McpAgentSession } from './agent-session.js';
import { toolResult } from './results.js';
import { usageReportBodyFields } from '../wire/usage.js';
import { streamNameSchema } from '../wire/streams.js';
import { STREAM_NAME_DEFAULT, streamTextChunks } from '../engine/attempt/streams.js';
import type { StreamChunkInput } from '../db/queries/streams.js';
import { InvalidInputError } from '../errors.js';

/**
 * The tools an agent's MCP session has: work a DAG's tasks one call at a time. The descriptions are written for
 * a model: what each tool does, when to call it, and what a refusal means.
 */
const taskId = z.string().max(64).optional()
  .describe('the task to report on; leave it out when you hold one task (the usual case)');

export function agentToolsRegister(server: McpServer, session: McpAgentSession): void {
  server.registerTool('next_task', {
    title: 'Take the next task',
    description: [
      'Claim one task of a DAG that you are able to do, and start it. Returns the task: what to do (prompt, input),',
      'the outputs of the tasks before it (inputs), why earlier attempts failed (previous_attempts: do better than',
      'they did), and the model to use. While you hold it, this session keeps it yours; report on it with',
      'complete when done, fail when you cannot do it, or release to hand it back unstarted. Returns no task when',
      'none is ready: wait (wait_sec, up to 30) or try again later.',
    ].join(' '),
    inputSchema: {
      wait_sec: z.number().min(0).max(30).optional().describe('wait up to this long for a task to become ready; default 0'),
      dag_id: z.string().max(64).optional().describe('only a task of this DAG'),
      capabilities: z.array(capabilitySchema).max(64).optional().describe('what you can do (within what your token grants); default all it grants'),
      models: z.array(agentModelSchema).max(32).optional().describe('the models you can run; a task that names models goes only to an agent with one of them'),
    },
  }, (a) => toolResult(async () => {
    const task = await session.next({ waitSec: a.wait_sec, dagId: a.dag_id, capabilities: a.capabilities, models: a.models });
    return task ? { task: taskView(task), lease: { expires_at: task.leaseExpiresAt, kept: 'by this session, which heartbeats it while the session lasts; if the session ends, the task goes back to the queue after its lease' }, next: 'Do the task. Then call complete with your output (or fail, or release). Call heartbeat with progress on long work; log to leave notes a person can read.' } : { task: null, next: 'No task is ready for you. Call next_task again later, or with wait_sec.' };
  }));

  server.registerTool('heartbeat', {
    title: 'Report progress',
    description: 'Say how far along the task is (progress 0–1, a message). The session keeps your lease on its own; call this to record progress on long work.',
    inputSchema: { task_id: taskId, ...reportProgress },
  }, (a) => toolResult(async () => ({ lease_expires_at: await session.heartbeat(a.task_id, a.progress, a.message) })));

  server.registerTool('complete', {
    title: 'Complete the task',
    description: [
      'Hand in the task\'s output (any JSON). When the DAG validates outputs, the answer says whether it passed;',
      'a rejected output comes back to an agent as a retry with the validators\' reasons. Report what the attempt',
      'cost. After this the task is no longer yours: take the next one with next_task.',
    ].join(' '),
    inputSchema: { task_id: taskId, output: z.unknown().describe('the result of the task, as JSON'), ...reportSpend },
  }, (a) => toolResult(async () => {
    const r = await session.complete(a.task_id, a.output ?? null, spendOfReport(a));
    return { completed: r.completed.length > 0, settled: r.settled ?? null, next: 'Call next_task for more work.' };
  }));

  server.registerTool('fail', {
    title: 'Fail the task',
    description: 'Say you could not do the task, and why. The DAG\'s retry policy decides whether it runs again (maybe on another agent); retryable false sends it to a person at once. After this the task is no longer yours.',
    inputSchema: { task_id: taskId, ...reportFailure, ...reportSpend },
  }, (a) => toolResult(async () => session.fail(a.task_id, { errorClass: a.error_class, message: a.message, retryable: a.retryable, ...spendOfReport(a) })));

  server.registerTool('release', {
    title: 'Hand the task back',
    description: 'Give the task back unfinished, without using up an attempt (you are stopping, or it is not for you). Another agent takes it.',
    inputSchema: { task_id: taskId, reason: z.string().max(2000).optional(), ...reportSpend },
  }, (a) => toolResult(async () => {
    await session.release(a.task_id, a.reason, spendOfReport(a));
    return { released: true };
  }));

  server.registerTool('spawn_subtasks', {
    title: 'Add subtasks',
    description: [
      'Split the task: add subtasks to its DAG (data only: a key, a type, a prompt and input, or a template the DAG',
      'declares; never commands, validators or capabilities). With wait true your attempt ends now, and the task',
      'comes back to an agent through next_task once they have all completed, with their outputs in children:',
      'spawn the same keys then, and you get their outputs at once.',
    ].join(' '),
    inputSchema: {
      task_id: taskId,
      subtasks: z.array(z.unknown()).min(1).max(LIMITS.spawnPerCall).describe('[{key, type, title?, spec: {prompt?, input?}, depends_on?}] or [{key, template, spec: {input}}]'),
      wait: z.boolean().optional().describe('end this attempt and continue when the subtasks are done'),
      ...reportSpend,
    },
  }, (a) => toolResult(async () => {
    const r = await session.spawn(a.task_id, a.subtasks, a.wait ?? false, spendOfReport(a));
    return { ...r, next: r.waiting ? 'Your attempt has ended: stop working on this task. Call next_task.' : 'Carry on with the task.' };
  }));

  server.registerTool('log', {
    title: 'Leave a note',
    description: 'Write lines to the task\'s log, which a person reads when they look at what you did (dagent logs, the dashboard). Keep them short.',
    inputSchema: { task_id: taskId, lines: z.array(reportLogLine).min(1).max(500) },
  }, (a) => toolResult(async () => session.logLines(a.task_id, a.lines)));

  stepToolsRegister(server, session);
  usageToolRegister(server, session);
  streamToolRegister(server, session);
}

/** Most text one stream_write call carries (characters): 16 chunks' worth; longer text goes in several calls. */
const STREAM_WRITE_TEXT_MAX = 16 * LIMITS.streamChunkBytes;

/** Streams (engine/attempt/streams.ts): output people watch while the task runs (dagent stream, the SSE route). */
function streamToolRegister(server: McpServer, session: McpAgentSession): void {
  server.registerTool('stream_write', {
    title: 'Write to a stream people watch',
    description: [
      'Append output a person follows live while you work (a draft as you write it, progress as JSON): text is',
      'joined to what you wrote before, a json value is an item of its own. Each call appends, in the order you',
      'call: do not repeat a call that answered (it would be written twice), unless you name its seq. end true ends',
      `the stream (readers see it end); a stream you do not end ends with the task. ended "truncated": the task's`,
      `streams hold ${LIMITS.streamBytesPerAttempt} bytes, nothing more is kept; carry on with the task. LEASE_LOST: the task is no longer yours.`,
    ].join(' '),
    inputSchema: {
      task_id: taskId,
      name: streamNameSchema.optional().describe(`the stream (default ${STREAM_NAME_DEFAULT}); lowercase letters, digits, _ . -`),
      text: z.string().max(STREAM_WRITE_TEXT_MAX).optional().describe('text, appended to what you wrote before'),
      json: z.unknown().optional().describe(`a JSON value, an item of its own (at most ${LIMITS.streamChunkBytes} bytes as JSON)`),
      end: z.boolean().optional().describe('end the stream after this write'),
      seq: z.number().int().min(1).max(2_000_000_000).optional()
        .describe('where this write starts: the previous answer\'s chunks + 1. Name it to make a call you repeat (its answer was lost) write nothing the second time'),
    },
  }, (a) => toolResult(async () => {
    if (a.text !== undefined && a.json !== undefined) throw new InvalidInputError('give text or json, not both (two calls write both, in order)', { field: 'json' });
    if (a.text === undefined && a.json === undefined && !a.end) throw new InvalidInputError('give text, json, or end: true', { field: 'text' });
    let chunks: StreamChunkInput[] = [];
    if (a.text !== undefined) chunks = streamTextChunks(a.text);
    else if (a.json !== undefined) {
      const data = JSON.stringify(a.json);
      const bytes = Buffer.byteLength(data);
      if (bytes > LIMITS.streamChunkBytes) throw new InvalidInputError(`json: ${bytes} bytes; a JSON item holds at most ${LIMITS.streamChunkBytes}`, { field: 'json' });
      chunks = [{ kind: 'json', data }];
    }
    const r = await session.streamWrite(a.task_id, { name: a.name ?? STREAM_NAME_DEFAULT, chunks, end: a.end ?? false, seq: a.seq });
    return {
      applied: r.applied, chunks: r.chunks, ended: r.ended,
      next: r.ended === 'truncated' ? 'The task\'s streams are full: what you write is no longer kept. Stop writing to streams; carry on with the task.'
        : r.ended ? 'This stream has ended. Carry on with the task.'
        : !r.applied && a.seq !== undefined ? `Written before: nothing written again. The next write's seq is ${r.chunks + 1}.`
        : 'Carry on.',
    };
  }));
}

/**
 * Durable steps (engine/attempt/steps.ts): what a model records of its expensive work, so that the next attempt of
 * the task, after a crash, a lost session or a retry, reuses it instead of paying for it again.
 */
function stepToolsRegister(server: McpServer, session: McpAgentSession): void {
  const stepName = z.string().describe(
    `1-${STEP_NAME_MAX} printable characters: what the work is and where, the same in every attempt (in a loop: call-1, call-2, …)`,
  );
  const refusals = [
    'A name is recorded once per attempt: a second step_record of a name you already used is refused (give each call its own name); step_get may read it again.',
    'INVALID_INPUT (a bad name, a result too large) records nothing: correct it and call again. LEASE_LOST: the task is no longer yours; stop working on it.',
  ].join(' ');

  server.registerTool('step_get', {
    title: 'Look up a step',
    description: [
      'Before expensive work (an LLM call, a paid API or tool call, anything slow or with side effects), look it up',
      'by the step name you will record it under. A step is such work\'s result, recorded with step_record and kept',
      'for the task: if an earlier attempt of this task (before a crash, a lost session or a retry) recorded it, you',
      'get its result (recorded: true): use it, do not do the work again. recorded: false: do the work, then record',
      `its result with step_record under the same name. ${refusals}`,
    ].join(' '),
    inputSchema: { task_id: taskId, name: stepName },
  }, (a) => toolResult(async () => {
    const step = await session.stepGet(a.task_id, a.name);
    return step
      ? { recorded: true, result: step.result, recorded_by_attempt: step.attempt, next: 'Use this result; do not do this work again.' }
      : { recorded: false, next: `Do the work, then call step_record with name ${JSON.stringify(a.name)} and its result.` };
  }));

  server.registerTool('step_record', {
    title: 'Record a step',
    description: [
      'Record the result (any JSON) of expensive work you just did, under its step name (see step_get), so that a',
      'later attempt of this task reuses it instead of paying for it again. Report what the work cost (cost_usd,',
      'tokens_in, tokens_out, model): it is kept with the step (still count it in the total you report with complete).',
      'recorded: false means a step of that name was recorded before (first write wins): use the result returned,',
      'not yours. scope "attempt": kept for a person to see, never reused by a later attempt (work to redo each time).',
      refusals,
    ].join(' '),
    inputSchema: {
      task_id: taskId,
      name: stepName,
      result: z.unknown().refine((v) => v !== undefined, { error: 'required: the work\'s result as JSON (null for none)' })
        .describe(`the work's result, as JSON (at most ${LIMITS.stepResultBytes} bytes)`),
      scope: z.enum(STEP_SCOPES).optional().describe('task (default): reused by every later attempt; attempt: recorded for visibility only'),
      duration_ms: z.number().int().min(0).max(2_147_483_647).optional().describe('how long the work took'),
      ...reportSpend,
      cost_usd: reportSpend.cost_usd.describe('USD this work cost'),
    },
  }, (a) => toolResult(async () => {
    const r = await session.stepRecord(a.task_id, { name: a.name, result: a.result, scope: a.scope, durationMs: a.duration_ms, ...spendOfReport(a) });
    return r.recorded
      ? { recorded: true, result: r.result }
      : { recorded: false, result: r.result, next: 'A step of this name was recorded before (first write wins): use this result, not yours.' };
  }));
}

/** The usage tool: spend reported as it happens, charged at once and held to the attempt's limits. */
function usageToolRegister(server: McpServer, session: McpAgentSession): void {
  server.registerTool('report_usage', {
    title: 'Report what you spent',
    description: [
      'Report what a model call or paid tool call just cost (cost_usd, tokens), right after it: it is charged at once,',
      'so it is kept if your session dies, and it is held to the task\'s spend limits. The answer says what is left',
      '(remaining_usd, remaining_tokens; low set: 80 % of a limit is spent, wrap up). stopped set: this report passed a limit, the task has been stopped and is no longer yours; do',
      'no more work on it. Each call is one report: do not repeat a call that answered, and do not count what you',
      'reported here again in complete, fail or release (report only what you have not reported).',
    ].join(' '),
    inputSchema: {
      task_id: taskId,
      ...reportSpend,
      cost_usd: usageReportBodyFields.cost_usd,
      cached_read_tokens: usageReportBodyFields.cached_read_tokens,
      cache_write_tokens: usageReportBodyFields.cache_write_tokens,
    },
  }, (a) => toolResult(async () => {
    const r = await session.reportUsage(a.task_id, {
      costUsd: a.cost_usd, tokensIn: a.tokens_in, tokensOut: a.tokens_out, cachedReadTokens: a.cached_read_tokens, cacheWriteTokens: a.cache_write_tokens, model: a.model,
    });
    return {
      attempt_cost_usd: r.attempt.costUsd, remaining_usd: r.remainingUsd, remaining_tokens: r.remainingTokens, low: r.low, stopped: r.stopped,
      next: r.stopped ? 'A spend limit stopped this task: it is no longer yours. Stop working on it and call next_task.'
        : r.low ? `Little is left under ${r.low.limit}: wrap up and complete the task with what you have.` : 'Carry on with the task.',
    };
  }));
}

/** The claimed task as a model reads it: what to do and what it has, none of the lease's mechanics. */
function taskView(t: ClaimedTask) {
  return {
    id: t.id, dag_id: t.dagId, key: t.key, type: t.type, title: t.title, attempt: t.attempt, max_attempts: t.maxAttempts,
    prompt: t.spec.prompt ?? null, input: t.spec.input, inputs: t.inputs, children: t.children,
    model: t.model, models: t.models, previous_attempts: t.previousAttempts, output_spec: t.outputSpec,
    max_duration_sec: t.maxDurationSec, max_cost_usd: t.maxCostUsd, traceparent: t.traceparent,
  };
}
