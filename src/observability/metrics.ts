import client from 'prom-client';
import { listenerReconnectsTotal, listenersDown } from '../db/ready-listener.js';
import type { Db } from '../db/handle.js';
import { agentList } from '../db/queries/agents.js';
import { dagSpendReport } from '../db/queries/dags.js';
import { modelPauseList } from '../db/queries/model-pauses.js';
import { tenantList } from '../db/queries/tenants.js';
import { rateLimitList } from '../db/queries/rate-limits.js';
import { taskCountsByStatusTier, taskOldestReadyAgeSec } from '../db/queries/tasks-read.js';
import { webhookDeliveryCounts } from '../db/queries/webhooks.js';
import { usageByModel } from '../db/queries/usage.js';
import { engineEvents, type EngineEventMap } from './engine-events.js';

/** Dead-letter reasons as a bounded label (the reason text carries counts). */
export function deadLetterReasonLabel(reason: string): string {
  if (reason.startsWith('poison pill')) return 'poison_pill';
  if (reason.startsWith('non-retryable')) return 'non_retryable';
  if (reason.includes('no_retry_on')) return 'no_retry_on';
  if (reason.includes('not in retry_on')) return 'not_in_retry_on';
  if (reason.startsWith('attempts exhausted')) return 'attempts_exhausted';
  return 'other';
}

/**
 * The Prometheus registry `/metrics` serves. Two kinds of figures:
 *  - state, read from the database at each scrape (queue depth, budgets, agents' heartbeats): the same from every process;
 *  - what this process did (claims, waits, completions, failures, dead letters, reaped leases), counted from the
 *    engine's in-process events: per process, as Prometheus expects; sum them across `dagent up` instances.
 */
export class MetricsCollector {
  readonly registry = new client.Registry();
  private readonly unsubscribe: Array<() => void> = [];

  constructor(db: Db) {
    const r = [this.registry];
    client.collectDefaultMetrics({ register: this.registry, prefix: 'dagent_process_' });

    // One database pass per scrape, not one per gauge: prom-client calls each collect; the first one refreshes all.
    let refreshing: Promise<void> | undefined;
    const refresh = () => {
      refreshing ??= (async () => {
        const [counts, oldestAge, agents, spend, webhook, pauses, declared, byModel, tenants] = await Promise.all([
          taskCountsByStatusTier(db), taskOldestReadyAgeSec(db), agentList(db), dagSpendReport(db), webhookDeliveryCounts(db), modelPauseList(db), rateLimitList(db),
          usageByModel(db), tenantList(db),
        ]);
        for (const g of [tasks, agentHeartbeatAge, agentBudget, agentSpent, agentReserved, dagBudget, dagSpent, deliveries, modelPaused, modelLimits, rateUsed, rateLimit, usageUsd, usageTokens, usageUnpriced, tenantTasks, tenantWeight, tenantServed, tenantWaiting]) g.reset();
        for (const t of tenants) {
          tenantTasks.set({ tenant: t.id, state: 'ready' }, t.ready);
          tenantTasks.set({ tenant: t.id, state: 'held' }, t.held);
          tenantWeight.set({ tenant: t.id }, t.weight);
          tenantServed.set({ tenant: t.id }, t.servedTokens);
          const pastQuota = t.quotaUntil !== null && t.quotaUntil.getTime() > Date.now();
          tenantWaiting.set({ tenant: t.id }, pastQuota || (t.maxRunning !== null && t.ready > 0 && t.held >= t.maxRunning) ? 1 : 0);
        }
        for (const u of byModel) {
          usageUsd.set({ model: u.model }, u.costUsd);
          usageTokens.set({ model: u.model, direction: 'in' }, u.tokensIn);
          usageTokens.set({ model: u.model, direction: 'out' }, u.tokensOut);
          usageUnpriced.set({ model: u.model }, u.unpricedReports);
        }
        for (const l of declared) {
          rateUsed.set({ key: l.key, unit: 'requests' }, l.requestsUsed);
          rateUsed.set({ key: l.key, unit: 'tokens' }, l.tokensUsed);
          if (l.requests !== null) rateLimit.set({ key: l.key, unit: 'requests' }, l.requests);
          if (l.tokens !== null) rateLimit.set({ key: l.key, unit: 'tokens' }, l.tokens);
        }
        for (const p of pauses) {
          modelPaused.set({ model: p.model }, p.remainingSec);
          modelLimits.set({ model: p.model }, p.hits);
        }
        for (const c of counts) tasks.set({ status: c.status, tier: c.tier }, c.n);
        oldest.set(oldestAge ?? 0);
        const now = Date.now();
        for (const a of agents) {
          agentHeartbeatAge.set({ agent: a.id, status: a.status }, (now - a.heartbeatAt.getTime()) / 1000);
          if (a.budgetUsd !== null) agentBudget.set({ agent: a.id }, Number(a.budgetUsd));
          agentSpent.set({ agent: a.id }, Number(a.spentUsd));
          agentReserved.set({ agent: a.id }, Number(a.reservedUsd));
        }
        for (const d of spend.open) {
          if (d.budgetUsd !== null) dagBudget.set({ dag: d.id, name: d.name }, Number(d.budgetUsd));
          dagSpent.set({ dag: d.id, name: d.name }, Number(d.spentUsd));
        }
        spentTotal.set(spend.totalSpentUsd);
        for (const w of webhook) deliveries.set({ status: w.status }, w.n);
      })().finally(() => { setImmediate(() => { refreshing = undefined; }); });
      return refreshing;
    };
    const tasks = new client.Gauge({ name: 'dagent_tasks', help: 'Tasks by status and priority tier (urgent < 25 ≤ high < 50 ≤ normal < 75 ≤ background)', labelNames: ['status', 'tier'], registers: r, collect: refresh });
    const oldest = new client.Gauge({ name: 'dagent_oldest_ready_seconds', help: 'Age of the oldest READY task (0 when none)', registers: r, collect: refresh });
    const agentHeartbeatAge = new client.Gauge({ name: 'dagent_agent_heartbeat_age_seconds', help: 'Seconds since each agent\'s last heartbeat', labelNames: ['agent', 'status'], registers: r, collect: refresh });
    const agentBudget = new client.Gauge({ name: 'dagent_agent_budget_usd', help: 'Agent budget (agents with one)', labelNames: ['agent'], registers: r, collect: refresh });
    const agentSpent = new client.Gauge({ name: 'dagent_agent_spent_usd', help: 'Agent spend so far', labelNames: ['agent'], registers: r, collect: refresh });
    const agentReserved = new client.Gauge({ name: 'dagent_agent_reserved_usd', help: 'Agent budget reserved by its claimed and running tasks', labelNames: ['agent'], registers: r, collect: refresh });
    const dagBudget = new client.Gauge({ name: 'dagent_dag_budget_usd', help: 'Budget of each open DAG that has one', labelNames: ['dag', 'name'], registers: r, collect: refresh });
    const dagSpent = new client.Gauge({ name: 'dagent_dag_spent_usd', help: 'Spend of each open DAG', labelNames: ['dag', 'name'], registers: r, collect: refresh });
    const spentTotal = new client.Gauge({ name: 'dagent_spent_usd', help: 'Spend of all DAGs, ever', registers: r, collect: refresh });
    const usageUsd = new client.Gauge({ name: 'dagent_usage_usd', help: 'Usage reported while attempts ran, by model, as the ledger holds it (the tasks retention kept)', labelNames: ['model'], registers: r, collect: refresh });
    const usageTokens = new client.Gauge({ name: 'dagent_usage_tokens', help: 'Tokens reported while attempts ran, by model and direction, as the ledger holds them', labelNames: ['model', 'direction'], registers: r, collect: refresh });
    const usageUnpriced = new client.Gauge({ name: 'dagent_usage_unpriced_reports', help: 'Usage reports whose cost the reporter did not know (cost unknown: not in dagent_usage_usd), by model', labelNames: ['model'], registers: r, collect: refresh });
    const tenantTasks = new client.Gauge({ name: 'dagent_tenant_tasks', help: 'Each tenant\'s tasks READY, and held by agents (claimed, running, validating)', labelNames: ['tenant', 'state'], registers: r, collect: refresh });
    const tenantWeight = new client.Gauge({ name: 'dagent_tenant_weight', help: 'Each tenant\'s weight in fair share', labelNames: ['tenant'], registers: r, collect: refresh });
    const tenantServed = new client.Gauge({ name: 'dagent_tenant_served_tokens', help: 'Estimated tokens of the tasks claimed for each tenant, in all (what fair share counted); its rate against the weights is the share received', labelNames: ['tenant'], registers: r, collect: refresh });
    const tenantWaiting = new client.Gauge({ name: 'dagent_tenant_quota_waiting', help: '1 while a tenant\'s work waits at a quota (running, USD per day, tokens per minute)', labelNames: ['tenant'], registers: r, collect: refresh });
    const deliveries = new client.Gauge({ name: 'dagent_webhook_deliveries', help: 'Webhook deliveries by status', labelNames: ['status'], registers: r, collect: refresh });
    const modelPaused = new client.Gauge({ name: 'dagent_model_paused_seconds', help: 'Seconds until a model paused after a provider\'s rate limit is handed out again (0: not paused)', labelNames: ['model'], registers: r, collect: refresh });
    const rateUsed = new client.Gauge({ name: 'dagent_rate_limit_used', help: 'What a declared rate limit\'s current window holds: requests claimed, tokens reserved or used', labelNames: ['key', 'unit'], registers: r, collect: refresh });
    const rateLimit = new client.Gauge({ name: 'dagent_rate_limit', help: 'A declared rate limit per window (dagent limits list shows the window)', labelNames: ['key', 'unit'], registers: r, collect: refresh });
    const modelLimits = new client.Gauge({ name: 'dagent_model_rate_limits', help: 'Rate limits each model has hit, ever (each paused it for the fleet)', labelNames: ['model'], registers: r, collect: refresh });


    const claims = new client.Counter({ name: 'dagent_claims_total', help: 'Claims by this process, by whether they got a task', labelNames: ['result'], registers: r });
    const claimed = new client.Counter({ name: 'dagent_tasks_claimed_total', help: 'Tasks claimed through this process, by type', labelNames: ['type'], registers: r });
    const wait = new client.Histogram({
      name: 'dagent_task_wait_seconds', help: 'Time from READY to claimed, for tasks claimed through this process', labelNames: ['type'], registers: r,
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14_400],
    });
    const completed = new client.Counter({ name: 'dagent_tasks_completed_total', help: 'Tasks completed through this process, by type', labelNames: ['type'], registers: r });
    const failed = new client.Counter({ name: 'dagent_task_failures_total', help: 'Failed attempts recorded by this process, by type, error class and what the retry policy did', labelNames: ['type', 'error_class', 'outcome'], registers: r });
    const deadLettered = new client.Counter({ name: 'dagent_tasks_dead_lettered_total', help: 'Tasks dead-lettered by this process, by type and reason', labelNames: ['type', 'reason'], registers: r });
    const reaped = new client.Counter({ name: 'dagent_heartbeat_misses_total', help: 'Leases the reaper in this process took back, by agent and reason (claim_ttl, heartbeat, max_duration)', labelNames: ['agent', 'reason'], registers: r });

    this.on('claim', (e) => {
      claims.inc({ result: e.claimed.length ? 'claimed' : 'empty' });
      for (const t of e.claimed) {
        claimed.inc({ type: t.type });
        wait.observe({ type: t.type }, Math.max(0, t.waitSec));
      }
    });
    this.on('completed', (e) => { for (const [type, n] of Object.entries(e.byType)) completed.inc({ type }, n); });
    this.on('failed', (e) => {
      failed.inc({ type: e.type, error_class: e.errorClass, outcome: e.outcome });
      if (e.outcome === 'dead_lettered') deadLettered.inc({ type: e.type, reason: deadLetterReasonLabel(e.reason ?? '') });
    });
    this.on('reaped', (e) => reaped.inc({ agent: e.agentId ?? 'none', reason: e.reason }));
    let reconnectsSeen = 0;
    new client.Counter({
      name: 'dagent_listener_reconnects_total', help: 'Times this process\'s LISTEN connection was made again (dropped, or found half-open by its health check)', registers: r,
      collect() {
        const now = listenerReconnectsTotal();
        if (now > reconnectsSeen) this.inc(now - reconnectsSeen);
        reconnectsSeen = now;
      },
    });
    new client.Gauge({
      name: 'dagent_listener_down', help: 'This process\'s LISTEN connections that are not listening now (reconnecting): its agents find work by polling only until they are back', registers: r,
      collect() { this.set(listenersDown()); },
    });
    const workspaces = new client.Counter({ name: 'dagent_workspaces_total', help: 'Worktrees of this process\'s agents\' attempts: made, committed at the end, or refused (a cap, an unusable repository)', labelNames: ['result', 'error_class'], registers: r });
    const workspaceBytes = new client.Histogram({
      name: 'dagent_workspace_disk_bytes', help: 'Bytes of files in each worktree when its attempt\'s work was committed (DAGENT_LIMIT_WORKSPACE_BYTES caps it)', registers: r,
      buckets: [1e5, 1e6, 1e7, 1e8, 1e9, 1e10],
    });
    this.on('workspace', (e) => {
      workspaces.inc({ result: e.result, error_class: e.errorClass ?? '' });
      if (e.diskBytes !== undefined) workspaceBytes.observe(e.diskBytes);
    });
    const dropped = new client.Counter({ name: 'dagent_event_streams_dropped_total', help: 'Event streams this process cut off because their reader fell more than DAGENT_LIMIT_STREAM_BACKLOG_BYTES behind', registers: r });
    this.on('streamDropped', () => dropped.inc());
  }

  private on<K extends keyof EngineEventMap>(event: K, fn: (...args: EngineEventMap[K]) => void): void {
    engineEvents.on(event, fn as never);
    this.unsubscribe.push(() => engineEvents.off(event, fn as never));
  }

  /**
   * The exposition text; for a token scoped to tenants (`tenants`), only the series labelled with one of them: the
   * deployment's totals and other tenants' series are not theirs to see.
   */
  async metrics(tenants: readonly string[] | null = null): Promise<string> {
    const text = await this.registry.metrics();
    return tenants ? metricsOfTenants(text, tenants) : text;
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** A figure of this process that only it knows (say, claims waiting on this node), read at each scrape. */
  processGauge(name: string, help: string, read: () => number): void {
    new client.Gauge({ name, help, registers: [this.registry], collect() { this.set(read()); } });
  }

  close(): void {
    for (const u of this.unsubscribe) u();
  }
}

/** The samples of `text` (Prometheus text format) whose `tenant` label is one of `tenants`, each family's HELP and TYPE kept with them. */
export function metricsOfTenants(text: string, tenants: readonly string[]): string {
  const out: string[] = [];
  let header: string[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('# HELP ')) header = [line];
    else if (line.startsWith('# TYPE ')) header.push(line);
    else {
      const tenant = /[{,]tenant="([^"\\]*)"/.exec(line)?.[1];
      if (tenant === undefined || !tenants.includes(tenant)) continue;
      out.push(...header, line);
      header = [];
    }
  }
  return out.length ? `${out.join('\n')}\n` : '';
}
