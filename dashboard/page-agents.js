// @ts-check
// The agents: status, capabilities, budget and a ticking heartbeat age.
import { api } from './api.js';
import { h, fill, main, badge, chips, table, empty, usd, agoSec, agoText, pageError } from './dom.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('../src/wire/fleet.js').AgentListAnswer} AgentListAnswer */
/** @typedef {import('../src/wire/rate-limits.js').RateLimitListAnswer} RateLimitListAnswer */

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
  fill(main, h('div', { class: 'page-head' }, h('h1', null, 'Agents')), limits, paused, h('div', { class: 'card flush' }, body));
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
      const [{ agents }, { rateLimits, paused: pausedModels }] = /** @type {[AgentListAnswer, RateLimitListAnswer]} */ (
        await Promise.all([api('GET', '/api/agents'), api('GET', '/api/rate-limits')]));
      return { agents, pausedModels, rateLimits };
    },
    apply: ({ agents, pausedModels, rateLimits }) => {
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
