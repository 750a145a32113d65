import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { ClaimedTask } from '../engine/attempt/claim.js';
import { reportFailure, reportLogLine, reportProgress, reportSpend, spendOfReport } from '../wire/reports.js';
import { capabilitySchema } from '../dag/file-schema.js';
import { agentModelSchema } from '../llm-models.js';
import { LIMITS } from '../config/index.js';
import type { McpAgentSession } from './agent-session.js';
import { toolResult } from './results.js';

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
