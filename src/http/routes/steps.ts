import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { stepNameCheck, stepRecord, stepReplay, stepReplaysList, stepShow, stepsList, type TaskStepRow } from '../../engine/attempt/steps.js';
import { NotFoundError } from '../../errors.js';
import { STEP_SCOPES } from '../../db/schema/task-steps.js';
import type { Principal } from '../../auth/tokens.js';
import { InvalidInputError } from '../../errors.js';
import { reportSpend, spendOfReport } from '../../wire/reports.js';
import { stepAnswerSchema, stepListAnswerSchema, stepRecordAnswerSchema, stepReplayViewOf, stepViewOf } from '../../wire/steps.js';
import { fence, holding } from '../task-holder.js';
import { route } from '../route.js';
import type { HttpDeps } from '../deps.js';

const readQuery = z.object({
  fence: z.coerce.number().int().min(0).max(2_147_483_647).optional().describe('an agent token\'s: the fence of its hold on the task'),
});

/**
 * Durable steps over HTTP: what a task's attempts recorded (readers, and the agent holding the task), and the
 * holder's record of a step's result under its fence (engine/attempt/steps.ts), the same semantics as ctx.step.
 */
export function stepRoutes(app: FastifyInstance, d: HttpDeps): void {
  const tag = 'steps';

  /** An agent token reads only the steps of a task its agent holds, under the fence it presents. */
  const mayRead = async (p: Principal | null, taskId: string, presented: number | undefined) => {
    if (p?.role !== 'agent') return;
    if (presented === undefined) throw new InvalidInputError('query.fence: an agent token presents the fence of its hold on the task', { field: 'query.fence' });
    await holding(d, p, taskId, presented);
  };
  const withResult = (s: TaskStepRow) => ({ ...stepViewOf(s), result: s.result });

  route(app, {
    method: 'GET', url: '/api/tasks/:id/steps', access: 'holder', tenants: { task: ['id'] }, tag, query: readQuery,
    summary: 'The durable steps a task\'s attempts recorded, without their results, and the steps later attempts replayed', response: stepListAnswerSchema,
  }, async ({ params, query, principal }) => {
    await mayRead(principal, params.id!, query.fence);
    const [steps, replays] = await Promise.all([stepsList(d.db, params.id!), stepReplaysList(d.db, params.id!)]);
    return { steps: steps.map(stepViewOf), replays: replays.map(stepReplayViewOf) };
  });

  route(app, {
    method: 'GET', url: '/api/tasks/:id/steps/:name', access: 'holder', tenants: { task: ['id'] }, tag, query: readQuery,
    summary: 'One recorded step with its result (the task-scoped one, else the latest attempt\'s); 404 when none was recorded. The holder\'s lookup (an agent token with its fence) is the replay: it answers only a task-scoped step, and records that its attempt replayed it',
    response: stepAnswerSchema,
  }, async ({ params, query, principal }) => {
    const name = stepNameCheck(params.name, 'params.name');
    await mayRead(principal, params.id!, query.fence);
    if (principal?.role !== 'agent') return { step: withResult(await stepShow(d.db, params.id!, name)) };
    const step = await stepReplay(d.db, { taskId: params.id!, fence: query.fence! }, name);
    if (!step) throw new NotFoundError('step', `${JSON.stringify(name)} of task ${params.id!}`);
    return { step: withResult(step) };
  });

  route(app, {
    method: 'PUT', url: '/api/tasks/:id/steps/:name', access: 'agent', tenants: { task: ['id'] }, tag,
    body: z.strictObject({
      fence,
      result: z.unknown().refine((v) => v !== undefined, { error: 'required: the step\'s JSON result (null for none)' }),
      scope: z.enum(STEP_SCOPES).optional().describe('task (default): replayed by every later attempt; attempt: recorded for visibility only'),
      duration_ms: z.number().int().min(0).max(2_147_483_647).optional().describe('how long the step\'s work took'),
      ...reportSpend,
    }),
    summary: 'Record a step\'s result under the holder\'s fence (first write wins: a name already recorded answers that step, 200); 409 when the fence no longer holds the task or its lease lapsed, and nothing is written',
    response: stepRecordAnswerSchema, successStatuses: { 200: 'already recorded: the recorded step, unchanged', 201: 'recorded' },
  }, async ({ params, body, principal, reply }) => {
    const name = stepNameCheck(params.name, 'params.name');
    await holding(d, principal, params.id!, body.fence, body.model);
    const spent = spendOfReport(body);
    const r = await stepRecord(d.db, {
      taskId: params.id!, fence: body.fence, name, result: body.result, scope: body.scope, durationMs: body.duration_ms,
      costUsd: spent.costUsd, tokensIn: spent.tokensIn, tokensOut: spent.tokensOut, model: spent.model,
    });
    if (r.recorded) reply.status(201);
    return { recorded: r.recorded, step: withResult(r.step) };
  });
}
