import { z } from 'zod';
import { instant } from './instant.js';

/** What the fleet routes answer (src/http/routes/fleet.ts), as sent: agents and the queue's health (engine/read/inspect.ts statsGet). */

/** A row of `agents` (db/rows.ts AgentRow). */
/** Why an agent's spend may be null: shown to a token of every tenant, or to one whose tenants are all the agent serves. */
export const SHARED_SPEND = 'null for a token scoped to tenants when the agent also serves others (its spend is partly theirs)';

export const agentViewSchema = z.object({
  id: z.string(),
  type: z.string(),
  status: z.string().describe('active, draining or offline'),
  capabilities: z.array(z.string()),
  models: z.array(z.string()).describe('model names, or `*` for any'),
  tenants: z.array(z.string()).nullable().describe('the tenants whose work it takes; null: every tenant\'s'),
  maxConcurrent: z.number(),
  budgetUsd: z.number().nullable(),
  spentUsd: z.number().nullable().describe(`what it spent; ${SHARED_SPEND}`),
  reservedUsd: z.number().nullable().describe(`what its claimed and running tasks hold against its budget; ${SHARED_SPEND}`),
  dailyBudgetUsd: z.number().nullable().describe('most it may spend in one UTC day; null: no cap'),
  daySpentUsd: z.number().nullable().describe(`what it spent on spendDay (a figure of an earlier day is no longer counted); ${SHARED_SPEND}`),
  spendDay: z.string().nullable().describe('the UTC date daySpentUsd counts'),
  heartbeatAt: instant,
  registeredAt: instant,
  claimWriter: z.string().nullable(),
  metadata: z.unknown().describe('what it registered with: host, pid, via, …'),
}).meta({ id: 'AgentView' });
export type AgentView = z.infer<typeof agentViewSchema>;

export const agentListAnswerSchema = z.object({ agents: z.array(agentViewSchema) });
export type AgentListAnswer = z.infer<typeof agentListAnswerSchema>;

/** A model (or provider) a provider's rate limit paused: no claim hands out a task on it until `until`. */
export const modelPauseSchema = z.object({
  model: z.string(),
  until: instant,
  remainingSec: z.number(),
  reason: z.string().nullable(),
  hits: z.number().describe('how many limits it took'),
}).meta({ id: 'ModelPause' });
export type ModelPauseView = z.infer<typeof modelPauseSchema>;

/** A tenant in the stats: its weight and served share, its work now, quotas, and why its work waits (engine/read/tenants.ts). */
export const tenantShareSchema = z.object({
  id: z.string(),
  name: z.string().nullable(),
  weight: z.number(),
  vtime: z.number().describe('tokens served ÷ weight: fair share serves the lowest first'),
  servedTokens: z.number(),
  servedTasks: z.number(),
  maxRunning: z.number().nullable(),
  maxQueued: z.number().nullable(),
  maxUsdPerDay: z.number().nullable().describe('quota: most USD its DAGs spend (and hold reserved) in one UTC day'),
  maxTokensPerMinute: z.number().nullable().describe('quota: most estimated tokens of its tasks claimed in a minute'),
  quotaUntil: instant.nullable().describe('past its money or tokens quota: claims pass its work over until then'),
  quotaReason: z.string().nullable(),
  ready: z.number(),
  held: z.number().describe('its tasks claimed, running or validating'),
  dags: z.number().describe('its open DAGs'),
  createdAt: instant,
  servedShare: z.number().describe('its part of all tokens served so far'),
  weightShare: z.number().describe('its part of all weights: what fair share aims at while every tenant has work'),
  waiting: z.string().nullable().describe('why its READY work waits (a quota); null otherwise'),
}).meta({ id: 'TenantShare' });

export const statsAnswerSchema = z.object({
  tenant: z.string().nullable().describe('the tenant the counts and oldest READY age are of; null: every tenant\'s'),
  tenants: z.array(tenantShareSchema),
  counts: z.array(z.object({ status: z.string(), tier: z.string().describe('urgent, high, normal or background'), n: z.number() })),
  oldestReadyAgeSec: z.number().nullable(),
  pausedModels: z.array(modelPauseSchema),
  agents: z.array(agentViewSchema.pick({ id: true, type: true, status: true, capabilities: true, heartbeatAt: true, budgetUsd: true, spentUsd: true })),
  loops: z.array(z.object({
    name: z.string(),
    holder: z.string().describe('the process that runs it: `<host>/<pid>/<random>`'),
    acquiredAt: instant,
    ranAt: instant.nullable(),
    expiresAt: instant,
    live: z.boolean().describe('false: its holder stopped renewing the lease'),
  })).describe('which process runs each maintenance loop'),
});
export type StatsAnswer = z.infer<typeof statsAnswerSchema>;
