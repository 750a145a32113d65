// The agents: status, capabilities, budget and a ticking heartbeat age.
import { api } from './api.js';
import { h, fill, main, badge, chips, table, empty, usd, agoSec, agoText, pageError } from './dom.js';

/** A heartbeat older than this is shown in red. */
const STALE_HEARTBEAT_SEC = 60;
/** The agents page refetches this often (heartbeats write no events). */
const AGENTS_REFRESH_MS = 5000;

export function pageAgents(ctx) {
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  fill(main, h('div', { class: 'page-head' }, h('h1', null, 'Agents')), h('div', { class: 'card flush' }, body));
  const heartbeats = [];

  const tick = () => {
    for (const { el, at } of heartbeats) {
      const sec = agoSec(at);
      el.textContent = agoText(sec);
      el.classList.toggle('stale', sec > STALE_HEARTBEAT_SEC);
    }
  };

  const load = ctx.refetcher({
    load: () => api('GET', '/api/agents'),
    apply: ({ agents }) => {
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
  ctx.onGlobal((e) => { if (e.type.startsWith('agent.')) load.soon(); });
}
