import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { tenantIdSchema } from '../../config/index.js';
import { tenantCreate, tenantSet, tenantShares, type TenantSettings } from '../../engine/ops/tenants.js';
import { NotFoundError } from '../../errors.js';
import { tenantsOf } from '../../auth/tenant-reach.js';
import { tenantShareSchema } from '../../wire/fleet.js';
import { route } from '../route.js';
import type { HttpDeps } from '../deps.js';

/** A quota in a request: a number, or null to clear it (left out: unchanged). The engine checks each, naming it. */
const quota = z.number().nullable().optional();
const settings = {
  name: z.string().min(1).max(200).optional(),
  weight: z.number().optional().describe('its weight in fair share (more than 0, at most 1000; default 1)'),
  max_running: quota.describe('most of its tasks held by agents at once; null clears it'),
  max_queued: quota.describe('most of its tasks not yet finished; null clears it'),
  max_usd_per_day: quota.describe('most USD its DAGs spend (and hold reserved) in one UTC day; null clears it'),
  max_tokens_per_minute: quota.describe('most estimated tokens of its tasks claimed in a minute; null clears it'),
};
type SettingsBody = { [K in keyof typeof settings]?: z.infer<(typeof settings)[K]> };

function settingsOf(b: SettingsBody): TenantSettings {
  return {
    name: b.name, weight: b.weight, maxRunning: b.max_running, maxQueued: b.max_queued, maxUsdPerDay: b.max_usd_per_day, maxTokensPerMinute: b.max_tokens_per_minute,
  };
}

/**
 * Tenants: the list with each one's share (read; a token scoped to tenants sees its own), and what an admin of every
 * tenant does (make one, change its weight, name or quotas): the same as `dagent tenants`, over HTTP.
 */
export function tenantRoutes(app: FastifyInstance, d: HttpDeps): void {
  const tag = 'tenants';
  route(app, {
    method: 'GET', url: '/api/tenants', access: 'read', tenants: 'filtered', tag,
    summary: 'The tenants: weight and the share of the tokens served each received against its share of the weights, work now, quotas and why its work waits',
    response: z.object({ tenants: z.array(tenantShareSchema) }),
  }, async ({ principal }) => {
    const scope = tenantsOf(principal);
    const all = await tenantShares(d.db);
    return { tenants: scope ? all.filter((t) => scope.includes(t.id)) : all };
  });

  route(app, {
    method: 'POST', url: '/api/tenants', access: 'admin', tenants: 'deployment', tag,
    body: z.strictObject({ id: tenantIdSchema, ...settings }),
    summary: 'Make a tenant (an admin token of every tenant); 409 when the id is taken; 400 naming a bad weight or quota, nothing written',
    response: z.object({ tenant: tenantShareSchema }), successStatuses: { 201: 'the tenant was made' },
  }, async ({ body, reply }) => {
    const t = await tenantCreate(d.db, { id: body.id, ...settingsOf(body) });
    reply.status(201);
    return { tenant: await shareOf(d, t.id) };
  });

  route(app, {
    method: 'POST', url: '/api/tenants/:id', access: 'admin', tenants: 'deployment', tag,
    body: z.strictObject(settings),
    summary: 'Change a tenant\'s weight, name or quotas (a quota null clears it); 404 for an unknown tenant; 400 naming a bad value, nothing written',
    response: z.object({ tenant: tenantShareSchema }),
  }, async ({ params, body }) => {
    await tenantSet(d.db, params.id!, settingsOf(body));
    return { tenant: await shareOf(d, params.id!) };
  });
}

async function shareOf(d: HttpDeps, id: string) {
  const t = (await tenantShares(d.db)).find((x) => x.id === id);
  if (!t) throw new NotFoundError('tenant', id);
  return t;
}
