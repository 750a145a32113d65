// @ts-check
// The DAG list: DAGs with their status, progress and spend, newest first, searched and filtered on the
// server and paged by its cursors, so it stays quick with 100,000 DAGs.
import { api, liveStreams } from './api.js';
import { h, fill, main, link, hrefDag, badge, table, empty, usd, when, agoText, progressBar, pageError, chips } from './dom.js';
import { OFFLINE_POLL_MS } from './live.js';
import { filterForm, pagedList } from './list-filter.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('../src/wire/dags.js').DagListAnswer} DagListAnswer */
/** @typedef {import('../src/wire/fleet.js').StatsAnswer} StatsAnswer */

/** DAGs per page. */
export const DAGS_PAGE = 50;

/** @param {PageContext} ctx */
export function pageDags(ctx) {
  const stats = h('p', { class: 'muted stats' });
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  const pager = pagedList(DAGS_PAGE, () => void load.now());
  const filters = filterForm([
    { name: 'q', label: 'Name, title or id', type: 'search' },
    { name: 'status', label: 'Status', type: 'select', options: ['running', 'blocked', 'completed', 'cancelled'] },
    { name: 'tag', label: 'Tag', type: 'text' },
    { name: 'tenant', label: 'Tenant', type: 'text' },
    { name: 'from', label: 'From', type: 'date' },
    { name: 'to', label: 'To', type: 'date' },
  ], (p) => pager.filter(p));
  fill(main, h('div', { class: 'page-head' }, h('h1', null, 'DAGs'), stats), filters.el, h('div', { class: 'card flush' }, body), pager.el);

  const load = ctx.refetcher({
    load: () => Promise.all([
      /** @type {Promise<DagListAnswer>} */ (api('GET', `/api/dags${pager.query()}`)),
      // The counts of the tenant the list is filtered to, else of every tenant the token reaches.
      /** @type {Promise<StatsAnswer | null>} */ (api('GET', `/api/stats${pager.current().tenant ? `?tenant=${encodeURIComponent(pager.current().tenant ?? '')}` : ''}`).catch(() => null)),
    ]),
    apply: ([{ dags, next }, st]) => {
      pager.loaded(next, dags.length);
      if (st) {
        /** @type {Record<string, number>} */
        const by = {};
        for (const c of st.counts) by[c.status] = (by[c.status] ?? 0) + c.n;
        fill(stats, 
          `ready ${by.ready ?? 0} · running ${(by.running ?? 0) + (by.claimed ?? 0)} · dead-lettered ${by.dead_lettered ?? 0}`,
          st.oldestReadyAgeSec != null ? ` · oldest ready ${agoText(Math.round(st.oldestReadyAgeSec)).replace(' ago', '')}` : '',
          ` · agents ${st.agents.length}`);
      }
      if (dags.length === 0) {
        fill(body, empty(Object.keys(pager.current()).length ? 'No DAG matches.' : 'No DAGs yet. Submit one with `dagent submit FILE` or POST /api/dags.'));
        return;
      }
      fill(body, table(['Name', 'Status', 'Progress', 'Spent / budget', 'Created'], dags.map((d) => h('tr', { 'data-dag-id': d.id },
        h('td', null, link(hrefDag(d.id), d.name), d.title ? h('div', { class: 'muted small' }, d.title) : null, h('div', { class: 'muted small mono' }, d.id),
          d.tenantId !== 'default' ? h('div', { class: 'muted small', 'data-tenant': d.tenantId }, `tenant ${d.tenantId}`) : null, d.tags?.length ? chips(d.tags) : null),
        h('td', null, badge(d.status), d.blockedReason ? h('div', { class: 'muted small' }, d.blockedReason) : null),
        h('td', null, progressBar(d.taskCounts, d.tasksTotal)),
        h('td', { class: 'num' }, usd(d.spentUsd), d.budgetUsd != null ? ` / ${usd(d.budgetUsd)}` : ''),
        h('td', null, when(d.createdAt)),
      )), { class: 'dags' }));
    },
    fail: (err) => fill(body, pageError(err)),
  });
  void load.now();
  ctx.every(OFFLINE_POLL_MS, () => { if (liveStreams === 0) load.soon(); });
  ctx.onGlobal((e) => {
    if (e.type === 'dag.progress' || e.type.startsWith('dag.') || e.type === 'task.dead_lettered' || e.type.startsWith('dlq.')) load.soon();
  });
}
