// @ts-check
// The agents: status, capabilities, budget and a ticking heartbeat age.
import { api } from './api.js';
import { h, fill, main, badge, chips, table, empty, usd, agoSec, agoText, pageError } from './dom.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('../src/wire/fleet.js').AgentListAnswer} AgentListAnswer */
/** @typedef {import('../src/wire/rate-limits.js').RateLimitListAnswer} RateLimitListAnswer */
/** @typedef {import('../src/wire/fleet.js').StatsAnswer} StatsAnswer */

/** A heartbeat older than this is shown in red. */
const STALE_HEARTBEAT_SEC = 60;
/** The agents page refetches this often (heartbeats write no events). */
const AGENTS_REFRESH_MS = 5000;

/** @param {PageContext} ctx */
export function pageAgents(ctx) {
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  // Models a provider's rate limit paused for the whole fleet: no claim hands out a task on them until then.
  const paused = h('div', { class: 'card', id: 'paused-models', hidden: true });
  // Limits declared ahead of time per model or provider, and what their window holds now.
  const limits = h('div', { class: 'card', id: 'rate-limits', hidden: true });
  // Tenants sharing the fleet: the share of the tokens each was served against its share of the weights.
  const tenants = h('div', { class: 'card', id: 'tenants', hidden: true });
  fill(main, h('div', { class: 'page-head' }, h('h1', null, 'Agents')), tenants, limits, paused, h('div', { class: 'card flush' }, body));
  /** @type {Array<{ el: HTMLElement, at: string }>} */
  const heartbeats = [];

  const tick = () => {
    for (const { el, at } of heartbeats) {
      const sec = agoSec(at);
      el.textContent = agoText(sec);
      el.classList.toggle('stale', sec > STALE_HEARTBEAT_SEC);
    }
  };

  const load = ctx.refetcher({
    load: async () => {
      const [{ agents }, { rateLimits, paused: pausedModels }, stats] = /** @type {[AgentListAnswer, RateLimitListAnswer, StatsAnswer | null]} */ (
        await Promise.all([
          api('GET', '/api/agents'),
          // The deployment's limits: a token scoped to tenants may not read them (403), and the page goes on without.
          api('GET', '/api/rate-limits').catch(() => ({ rateLimits: [], paused: [] })),
          api('GET', '/api/stats').catch(() => null),
        ]));
      return { agents, pausedModels, rateLimits, shares: stats?.tenants ?? [] };
    },
    apply: ({ agents, pausedModels, rateLimits, shares }) => {
      // One tenant (the default, alone) has nothing to share: the card shows once there are two.
      tenants.hidden = shares.length < 2;
      /** @param {number} x */
      const pct = (x) => `${(x * 100).toFixed(1)} %`;
      fill(tenants, h('h2', null, 'Tenants'),
        h('p', { class: 'muted' }, 'Fair share serves tenants with READY work in proportion to their weights, counted in the estimated tokens of the tasks claimed.'),
        table(['Tenant', 'Weight share', 'Served share', 'Tokens served', 'Ready', 'Held', 'Open DAGs', 'Waiting'], shares.map((t) => h('tr', { 'data-tenant': t.id },
          h('td', null, h('span', { class: 'mono' }, t.id), t.name ? h('div', { class: 'muted small' }, t.name) : null),
          h('td', { class: 'num' }, pct(t.weightShare)), h('td', { class: 'num' }, pct(t.servedShare)),
          h('td', { class: 'num' }, t.servedTokens.toLocaleString()), h('td', { class: 'num' }, String(t.ready)),
          h('td', { class: 'num' }, String(t.held)), h('td', { class: 'num' }, String(t.dags)),
          h('td', { class: 'small' }, t.waiting ?? '')))));
      limits.hidden = rateLimits.length === 0;
      /**
       * @param {number} used
       * @param {number | null} limit
       */
      const of = (used, limit) => (limit == null ? '—' : `${used.toLocaleString()} / ${limit.toLocaleString()}`);
      fill(limits, h('h2', null, 'Rate limits'),
        h('p', { class: 'muted' }, 'Declared per model or provider, shared by the fleet: a claim takes a task only while its model\'s window has room.'),
        table(['Model or provider', 'Requests in window', 'Tokens in window', 'Window'], rateLimits.map((l) => h('tr', { 'data-limit': l.key },
          h('td', { class: 'mono' }, l.key), h('td', { class: 'num' }, of(l.requestsUsed, l.requests)),
          h('td', { class: 'num' }, of(l.tokensUsed, l.tokens)), h('td', { class: 'num' }, `${l.windowSec} s`)))));
      paused.hidden = pausedModels.length === 0;
      fill(paused, h('h2', null, 'Paused models'),
        h('p', { class: 'muted' }, 'A provider answered with a rate limit: no agent is handed a task on these models until the pause lifts (a task that accepts another model runs on that one).'),
        table(['Model', 'Lifts in', 'Limits hit', 'Last reason'], pausedModels.map((p) => h('tr', { 'data-model': p.model },
          h('td', { class: 'mono' }, p.model), h('td', { class: 'num' }, `${Math.ceil(p.remainingSec)} s`),
          h('td', { class: 'num' }, String(p.hits)), h('td', { class: 'small clip' }, p.reason ?? '')))));
      heartbeats.length = 0;
      if (agents.length === 0) {
        fill(body, empty('No agents registered.'));
        return;
      }
      fill(body, table(['Agent', 'Type', 'Status', 'Capabilities', 'Models', 'Concurrency', 'Budget', 'Spent', 'Reserved', 'Heartbeat'],
        agents.map((a) => {
          const hb = h('span', { class: 'heartbeat', title: new Date(a.heartbeatAt).toISOString() });
          heartbeats.push({ el: hb, at: a.heartbeatAt });
          return h('tr', { 'data-agent-id': a.id },
            h('td', { class: 'mono' }, a.id), h('td', null, a.type), h('td', null, badge(a.status)),
            h('td', null, chips(a.capabilities)), h('td', null, chips(a.models)),
            h('td', { class: 'num' }, String(a.maxConcurrent)),
            h('td', { class: 'num' }, a.budgetUsd != null ? usd(a.budgetUsd) : 'unlimited'),
            h('td', { class: 'num' }, usd(a.spentUsd)), h('td', { class: 'num' }, usd(a.reservedUsd)),
            h('td', null, hb));
        }), { class: 'agents' }));
      tick();
    },
    fail: (err) => fill(body, pageError(err)),
  });
  void load.now();
  ctx.every(1000, tick);
  ctx.every(AGENTS_REFRESH_MS, () => void load.now());
  ctx.onGlobal((e) => { if (e.type.startsWith('agent.') || e.type === 'task.rate_limited') load.soon(); });
}
