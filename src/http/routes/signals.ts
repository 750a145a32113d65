import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { signalSend } from '../../engine/waits/signals.js';
import { signalAnswerSchema } from '../../wire/signals.js';
import { actor, route } from '../route.js';
import type { HttpDeps } from '../deps.js';
import { tenantForWrite } from '../../auth/tenant-reach.js';
import { tenantIdSchema } from '../../config/index.js';

/** Signals to waiting tasks (signal or admin tokens): what a CI system or another service calls when its event happens. */
export function signalRoutes(app: FastifyInstance, d: HttpDeps): void {
  route(app, {
    method: 'POST', url: '/api/signals/:key', access: 'signal', tenants: 'filtered', tag: 'signals',
    body: z.strictObject({ payload: z.unknown().optional().describe('any JSON: the output of each task the signal completes (default null)') }).optional(),
    query: z.object({ tenant: tenantIdSchema.optional().describe('the tenant whose tasks it reaches (keys are per tenant); default a scoped token\'s tenant, else the default tenant') }),
    summary: 'Send a signal: every task waiting on the key (wait_for) completes with the payload as its output; one created earlier that begins waiting later completes with it too',
    response: signalAnswerSchema,
  }, async ({ params, body, query, principal }) => signalSend(d.db, params.key!, body?.payload ?? null, { by: actor(principal), log: d.log, tenant: tenantForWrite(principal, query.tenant) }));
}
