import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { agentBeat, agentClaimSeen, agentDeregister, agentDrain, agentRegister, agentRequire } from '../../engine/ops/agents.js';
import { taskClaim } from '../../engine/attempt/claim.js';
import { taskComplete } from '../../engine/attempt/complete.js';
import { taskHeartbeat, taskStart } from '../../engine/attempt/lease.js';
import { taskRelease } from '../../engine/attempt/release.js';
import { taskFail } from '../../engine/attempt/fail.js';
import { taskSpawn } from '../../engine/dag/spawn.js';
import { attemptLogAppend } from '../../engine/read/attempt-logs.js';
import { grantApply, grantCovers, grantMaxHeld, type Principal } from '../../auth/tokens.js';
import { AGENT_ID_PATTERN, AGENT_TOKEN_DEFAULTS, CLAIM_WAIT_DEFAULTS, tenantIdSchema } from '../../config/index.js';
import { capabilitySchema } from '../../dag/file-schema.js';
import { agentModelSchema } from '../../llm-models.js';
import { LIMITS } from '../../config/index.js';
import { ForbiddenError } from '../../errors.js';
import { fence, holding } from '../task-holder.js';
import { route } from '../route.js';
import {
  agentRegisterAnswerSchema, claimAnswerSchema, completeAnswerSchema, failureOutcomeSchema, leaseAnswerSchema, logAppendAnswerSchema, spawnAnswerSchema,
} from '../../wire/agent-protocol.js';
import { okAnswerSchema } from '../../wire/operations.js';
import { reportFailure, reportLogLine, reportProgress, reportSpend, spendOfReport } from '../../wire/reports.js';
import type { HttpDeps } from '../deps.js';
import { claimWhenReady } from '../long-poll.js';

const spend = reportSpend;

/** An agent token acts only as its own agent. */
function actingAs(p: Principal | null, agentId: string): void {
  if (p?.role === 'agent' && p.agentId !== agentId) {
    throw new ForbiddenError(`token ${p.tokenId} acts as agent ${p.agentId}, not ${agentId}`, { agentId });
  }
}

/**
 * The agent protocol over HTTP: register, heartbeat, drain, claim, and the reports on a task held (start, heartbeat,
 * spawn, complete, fail, release, log lines); the same calls, semantics and fencing as the TypeScript runtime.
 */
export function agentProtocolRoutes(app: FastifyInstance, d: HttpDeps): void {
  const tag = 'agent protocol';
  route(app, {
    method: 'POST', url: '/api/agents', access: 'agent', tenants: 'agent', tag,
    body: z.strictObject({
      id: z.string().regex(AGENT_ID_PATTERN, { error: 'letters, digits, _ . : - (max 128)' }),
      type: z.string().min(1).max(64),
      capabilities: z.array(capabilitySchema).max(64),
      models: z.array(agentModelSchema).max(32).optional(),
      max_concurrent: z.number().int().min(1).max(1000).optional(),
      budget_usd: z.number().positive().nullable().optional(),
      daily_budget_usd: z.number().positive().nullable().optional().describe('most it may spend in one UTC day; past it its attempts are stopped and it claims nothing until the next day'),
      tenants: z.array(tenantIdSchema).min(1).max(1000).optional().describe('the tenants whose work it takes; default every tenant\'s'),
      metadata: z.record(z.string(), z.unknown()).optional(),
    }),
    summary: 'Register (or re-register) an agent: its capabilities and budget decide what it may claim',
    response: agentRegisterAnswerSchema, successStatuses: { 201: 'registered' },
  }, async ({ body, principal, reply }) => {
    actingAs(principal, body.id);
    // An agent token registers only what its grant allows: capabilities are granted, not claimed.
    const reg = grantApply(principal!, {
      id: body.id, type: body.type, capabilities: body.capabilities, models: body.models, maxConcurrent: body.max_concurrent,
      budgetUsd: body.budget_usd, dailyBudgetUsd: body.daily_budget_usd, tenants: body.tenants ?? null, metadata: { ...body.metadata, via: 'http' },
    });
    const agent = await agentRegister(d.db, reg);
    reply.status(201);
    return { agent };
  });

  route(app, {
    method: 'POST', url: '/api/agents/:id/heartbeat', access: 'agent', tenants: 'agent', tag,
    summary: 'The agent is alive (brings an agent marked offline back)', response: okAnswerSchema,
  }, async ({ params, principal }) => {
    actingAs(principal, params.id!);
    await agentBeat(d.db, params.id!);
    return { ok: true as const };
  });

  for (const [verb, fn, summary] of [
    ['drain', agentDrain, 'Stop claiming (tasks in hand may finish); a re-registration makes the agent active again'],
    ['deregister', agentDeregister, 'Sign off: the agent is offline and claims nothing until it registers again'],
  ] as const) {
    route(app, { method: 'POST', url: `/api/agents/:id/${verb}`, access: 'agent', tenants: 'agent', tag, summary, response: okAnswerSchema }, async ({ params, principal }) => {
      actingAs(principal, params.id!);
      await agentRequire(d.db, params.id!);
      await fn(d.db, params.id!);
      return { ok: true as const };
    });
  }

  route(app, {
    method: 'POST', url: '/api/agents/:id/claim', access: 'agent', tenants: 'agent', tag,
    body: z.strictObject({
      limit: z.number().int().min(1).max(100).optional().describe('most tasks to claim; default 1'),
      start: z.boolean().optional().describe('claim straight into RUNNING under the heartbeat lease; default false (call start)'),
      dag_id: z.string().optional(),
      claim_ttl_sec: z.number().int().min(1).max(3600).optional().describe('seconds to start a claimed task; default 60'),
      wait_sec: z.number().min(0).max(CLAIM_WAIT_DEFAULTS.waitMaxSec).optional()
        .describe(`when nothing is READY for this agent, hold the request up to this many seconds (at most ${CLAIM_WAIT_DEFAULTS.waitMaxSec}) until something is; default 0`),
    }).optional(),
    summary: 'Claim the most urgent READY tasks this agent is capable of and can afford (may return none; with wait_sec, waits for some)',
    response: claimAnswerSchema,
  }, async ({ params, body, principal, reply }) => {
    actingAs(principal, params.id!);
    // Whatever the agent row says (an older registration, an operator's), an agent token claims only within its grant.
    const grant = principal?.role === 'agent' ? principal.grant : null;
    if (grant && body?.claim_ttl_sec !== undefined && body.claim_ttl_sec > AGENT_TOKEN_DEFAULTS.claimTtlMaxSec) {
      throw new ForbiddenError(`body.claim_ttl_sec: an agent token may leave a claimed task unstarted for at most ${AGENT_TOKEN_DEFAULTS.claimTtlMaxSec} s, not ${body.claim_ttl_sec}`, { field: 'body.claim_ttl_sec' });
    }
    const agent = grant || body?.wait_sec ? await agentRequire(d.db, params.id!) : undefined;
    if (agent) await agentClaimSeen(d.db, agent);
    const capabilities = grant ? agent!.capabilities.filter((c) => grantCovers(grant, c)) : undefined;
    const claim = () => taskClaim(d.db, params.id!, {
      limit: body?.limit, start: body?.start, dagId: body?.dag_id, claimTtlSec: body?.claim_ttl_sec, capabilities,
      // A token granted tenants claims their work only, in the statement, whoever registered the agent and for whom.
      grant: grant ? { maxHeld: grantMaxHeld(grant), budgetUsd: grant.budgetUsd, tenants: principal!.tenants } : undefined,
    });
    const granted = principal?.role === 'agent' ? principal.tenants : null;
    const reach = body?.wait_sec ? {
      capabilities: capabilities ?? agent!.capabilities, models: agent!.models,
      tenants: granted ? agent!.tenants?.filter((t) => granted.includes(t)) ?? [...granted] : agent!.tenants,
    } : undefined;
    // A waiting claim listens before its first claim statement, so no hint can fall between the two. When the node
    // knows nothing is READY for this agent (a probe found nothing, and no hint since), it waits without that claim.
    const since = reach ? await d.claimWaiters.mark() : 0;
    let tasks = reach && d.claimWaiters.nothingReadyFor(reach) ? [] : await claim();
    if (tasks.length === 0 && reach) {
      tasks = await claimWhenReady(d, { who: { agentId: params.id! }, reach, since, waitSec: body!.wait_sec!, tokenId: principal?.tokenId, reply, claim });
    }
    // One task claimed: its attempt's trace context also as the W3C header, for clients that propagate headers.
    if (tasks.length === 1) reply.header('traceparent', tasks[0]!.traceparent);
    return { tasks };
  });

  route(app, {
    method: 'POST', url: '/api/tasks/:id/start', access: 'agent', tenants: { task: ['id'] }, tag, body: z.strictObject({ fence }),
    summary: 'claimed → running; the heartbeat lease starts', response: leaseAnswerSchema,
  }, async ({ params, body, principal }) => {
    await holding(d, principal, params.id!, body.fence);
    return { leaseExpiresAt: await taskStart(d.db, { taskId: params.id!, fence: body.fence }) };
  });

  route(app, {
    method: 'POST', url: '/api/tasks/:id/heartbeat', access: 'agent', tenants: { task: ['id'] }, tag,
    body: z.strictObject({ fence, ...reportProgress }),
    summary: 'Extend the lease and record progress; 409 if the lease was lost', response: leaseAnswerSchema,
  }, async ({ params, body, principal }) => {
    await holding(d, principal, params.id!, body.fence);
    return { leaseExpiresAt: await taskHeartbeat(d.db, { taskId: params.id!, fence: body.fence, progress: body.progress, message: body.message }) };
  });

  route(app, {
    method: 'POST', url: '/api/tasks/:id/spawn', access: 'agent', tenants: { task: ['id'] }, tag,
    body: z.strictObject({
      fence,
      subtasks: z.array(z.unknown()).min(1).max(LIMITS.spawnPerCall).describe('subtask specs (the same vocabulary as ctx.spawn)'),
      wait: z.boolean().optional().describe('the parent waits for its subtasks: its attempt ends now'),
      ...spend,
    }),
    summary: 'Add subtasks to the running task\'s DAG (cycle-checked, idempotent per key)', response: spawnAnswerSchema,
  }, async ({ params, body, principal }) => {
    await holding(d, principal, params.id!, body.fence, body.model);
    return taskSpawn(d.db, { taskId: params.id!, fence: body.fence }, body.subtasks, { wait: body.wait, cost: spendOfReport(body), log: d.log });
  });

  route(app, {
    method: 'POST', url: '/api/tasks/:id/complete', access: 'agent', tenants: { task: ['id'] }, tag,
    body: z.strictObject({ fence, output: z.unknown(), ...spend }),
    summary: 'Submit the output: completed, or validated first when the task declares validation; the same completion made again is answered as replayed',
    response: completeAnswerSchema,
  }, async ({ params, body, principal }) => {
    await holding(d, principal, params.id!, body.fence, body.model);
    const r = await taskComplete(d.db, {
      taskId: params.id!, fence: body.fence, output: body.output ?? null,
      ...spendOfReport(body),
    });
    return { completed: r.completed.includes(params.id!), unblocked: r.unblocked, settled: r.settled ?? null, replayed: r.replayed ?? false };
  });

  route(app, {
    method: 'POST', url: '/api/tasks/:id/fail', access: 'agent', tenants: { task: ['id'] }, tag,
    body: z.strictObject({
      fence,
      ...reportFailure,
      retry_after_sec: z.number().min(0).max(86_400).optional(),
      details: z.record(z.string(), z.unknown()).optional()
        .refine((d) => d === undefined || Buffer.byteLength(JSON.stringify(d)) <= LIMITS.failureDetailsBytes, { error: `at most ${LIMITS.failureDetailsBytes} bytes as JSON` }),
      ...spend,
    }),
    summary: 'Record a failed attempt; the retry policy decides: retrying, ready or dead-lettered', response: failureOutcomeSchema,
  }, async ({ params, body, principal }) => {
    await holding(d, principal, params.id!, body.fence, body.model);
    return taskFail(d.db, {
      taskId: params.id!, fence: body.fence, errorClass: body.error_class, message: body.message, retryable: body.retryable,
      retryAfterSec: body.retry_after_sec, details: body.details, ...spendOfReport(body),
    }, { log: d.log });
  });

  route(app, {
    method: 'POST', url: '/api/tasks/:id/release', access: 'agent', tenants: { task: ['id'] }, tag,
    body: z.strictObject({ fence, reason: z.string().max(2000).optional(), ...spend }),
    summary: 'Hand the task back to READY without using an attempt (agent shutdown)', response: okAnswerSchema,
  }, async ({ params, body, principal }) => {
    await holding(d, principal, params.id!, body.fence, body.model);
    await taskRelease(d.db, { taskId: params.id!, fence: body.fence, reason: body.reason, ...spendOfReport(body) });
    return { ok: true as const };
  });

  route(app, {
    method: 'POST', url: '/api/tasks/:id/logs', access: 'agent', tenants: { task: ['id'] }, tag,
    body: z.strictObject({
      fence,
      lines: z.array(reportLogLine).min(1).max(500),
    }),
    summary: 'Store log lines with the attempt the agent holds (fenced); past the attempt\'s allowance they are counted as dropped; 409 if the lease was lost',
    response: logAppendAnswerSchema,
  }, async ({ params, body, principal }) => {
    await holding(d, principal, params.id!, body.fence);
    return attemptLogAppend(d.db, { taskId: params.id!, fence: body.fence }, body.lines);
  });
}
