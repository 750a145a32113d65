// @ts-check
// Spend: per UTC day, per DAG and per agent against their budgets, per model from the usage ledger, the attempts
// running with what they reported against their limit, and the attempts a spend limit stopped (GET /api/costs).
// Model names and task keys are agent or author text: shown as text, like everything else.
import { api } from './api.js';
import { h, fill, main, link, hrefDag, hrefTask, badge, table, section, empty, usd, when, pageError } from './dom.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('../src/wire/costs.js').CostsAnswer} CostsAnswer */

/** The windows offered for daily spend and stops, in UTC days (the API takes 1 to 90). */
const DAY_CHOICES = [1, 7, 30, 90];
const DAYS_DEFAULT = 7;
/**
 * Refetched this often besides on events: a usage report writes no event (it is on the agents' hot path), so what a
 * running attempt reported shows within this long. Not more often: the figures by model read the whole ledger.
 */
const SPEND_REFRESH_MS = 10_000;
/** Besides a DAG's events (its row's spend, its budget): those of an attempt that stopped or failed, which may have spent. */
const SPEND_TASK_EVENTS = new Set(['task.budget_exceeded', 'task.failed', 'task.dead_lettered']);

/** @param {PageContext} ctx */
export function pageSpend(ctx) {
  let days = DAYS_DEFAULT;
  const picker = h('select', { id: 'spend-days', 'aria-label': 'Days' },
    DAY_CHOICES.map((n) => h('option', { value: String(n), selected: n === days }, n === 1 ? 'today (UTC)' : `last ${n} days`)));
  picker.addEventListener('change', () => {
    days = Number(picker.value);
    void load.now();
  });
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  fill(main, h('div', { class: 'page-head head-row' }, h('h1', null, 'Spend'), picker), body);

  const load = ctx.refetcher({
    load: () => /** @type {Promise<CostsAnswer>} */ (api('GET', `/api/costs?days=${days}`)),
    apply: (r) => fill(body,
      daysView(r.days, days), runningView(r.running), stopsView(r.stops), dagsView(r.dags), agentsView(r.agents), modelsView(r.models)),
    fail: (err) => fill(body, pageError(err)),
  });
  void load.now();
  ctx.every(SPEND_REFRESH_MS, () => void load.now());
  ctx.onGlobal((e) => { if (e.type.startsWith('dag.') || SPEND_TASK_EVENTS.has(e.type)) load.soon(); });
}

/**
 * @param {CostsAnswer['days']} rows
 * @param {number} days
 */
function daysView(rows, days) {
  const total = rows.reduce((s, d) => s + d.costUsd, 0);
  const attempts = rows.reduce((s, d) => s + d.attempts, 0);
  return section('Per day (UTC)',
    h('p', { class: 'muted', id: 'spend-total' }, `${usd(total)} over ${days === 1 ? 'today' : `the last ${days} days`}, ${attempts} attempt(s) ended.`),
    rows.length
      ? table(['Day', 'Spent', 'Attempts'], rows.map((d) => h('tr', { 'data-day': d.day },
        h('td', null, d.day), h('td', { class: 'num' }, usd(d.costUsd)), h('td', { class: 'num' }, String(d.attempts)))), { id: 'spend-by-day' })
      : empty('No attempt ended in these days.'));
}

/**
 * What has been spent of a limit, as a bar and figures; the figures alone when there is no limit.
 * @param {number} spent
 * @param {number | null} limit
 */
function meter(spent, limit) {
  if (limit == null) return h('span', null, usd(spent), h('span', { class: 'muted' }, ' (no limit)'));
  const share = limit > 0 ? spent / limit : 1;
  const seg = h('div', { class: `seg status-${share >= 1 ? 'dead_lettered' : share >= 0.8 ? 'retrying' : 'running'}` });
  seg.style.width = `${Math.min(100, 100 * share)}%`;
  return h('div', { class: 'progress-wrap' }, h('div', { class: 'progress' }, seg),
    h('span', { class: 'progress-text' }, `${usd(spent)} of ${usd(limit)}`));
}

/** @param {CostsAnswer['running']} rows */
function runningView(rows) {
  return section('Running now',
    h('p', { class: 'muted' }, 'What each attempt has reported so far (charged as reported), against its task\'s max cost, and what its claim still reserves.'),
    rows.length
      ? table(['Task', 'DAG', 'Agent', 'Reported / max cost', 'Reserved'], rows.map((t) => h('tr', { 'data-task-id': t.taskId },
        h('td', null, link(hrefTask(t.taskId), t.key)), h('td', { class: 'mono small' }, link(hrefDag(t.dagId), t.dagId)),
        h('td', { class: 'mono' }, t.agentId ?? '—'), h('td', null, meter(t.spentUsd, t.maxCostUsd)),
        h('td', { class: 'num' }, usd(t.reservedUsd)))), { id: 'spend-running' })
      : empty('No attempt running has reported spend or is held to a cost.'));
}

/** @param {CostsAnswer['stops']} rows */
function stopsView(rows) {
  return section('Stopped at a limit',
    h('p', { class: 'muted' }, 'Attempts a spend limit stopped in these days (failed budget_exceeded), newest first.'),
    rows.length
      ? table(['When', 'Task', 'Agent', 'Limit', 'Spent / limit'], rows.map((s) => h('tr', { 'data-task-id': s.taskId },
        h('td', null, when(s.at)), h('td', null, link(hrefTask(s.taskId), s.key)),
        h('td', { class: 'mono' }, s.agentId ?? '—'), h('td', { class: 'mono' }, s.limit ?? '—'),
        h('td', { class: 'num' }, s.limitTokens != null ? `${s.spentTokens} / ${s.limitTokens} tokens` : `${usd(s.spentUsd)} / ${usd(s.limitUsd)}`))), { id: 'spend-stops' })
      : empty('No attempt was stopped at a limit in these days.'));
}

/**
 * @param {number | null} budget
 * @param {number | null} spent null: an agent shared with other tenants, for a token scoped to tenants (shown as —)
 * @param {number | null} reserved
 * @param {number | null} left
 */
function budgetCells(budget, spent, reserved, left) {
  return [
    h('td', { class: 'num' }, budget == null ? 'none' : usd(budget)), h('td', { class: 'num' }, usd(spent)),
    h('td', { class: 'num' }, usd(reserved)), h('td', { class: `num${left != null && left <= 0 ? ' error' : ''}` }, left == null ? '—' : usd(left)),
  ];
}

/** @param {CostsAnswer['dags']} rows */
function dagsView(rows) {
  return section('Per DAG',
    rows.length
      ? table(['DAG', 'Status', 'Budget', 'Spent', 'Reserved', 'Left'], rows.map((g) => h('tr', { 'data-dag-id': g.id },
        h('td', null, link(hrefDag(g.id), g.name), h('div', { class: 'muted small mono' }, g.id)), h('td', null, badge(g.status)),
        budgetCells(g.budgetUsd, g.spentUsd, g.reservedUsd, g.remainingUsd))), { id: 'spend-dags' })
      : empty('No DAG has spent, reserved or been given a budget.'));
}

/** @param {CostsAnswer['agents']} rows */
function agentsView(rows) {
  return section('Per agent',
    rows.length
      ? table(['Agent', 'Budget', 'Spent', 'Reserved', 'Left'], rows.map((a) => h('tr', { 'data-agent-id': a.id },
        h('td', { class: 'mono' }, a.id), budgetCells(a.budgetUsd, a.spentUsd, a.reservedUsd, a.remainingUsd))), { id: 'spend-agents' })
      : empty('No agents registered.'));
}

/**
 * A model's spend: what its reports of known cost add up to, and, never as $0, that some (or all) were of unknown cost.
 * @param {CostsAnswer['models'][number]} m
 */
function modelCost(m) {
  if (m.unpricedReports === 0) return usd(m.costUsd);
  const unknown = h('span', { class: 'cost-unknown', title: 'the reporter had no price for this model' }, 'cost unknown');
  if (m.unpricedReports >= m.reports) return unknown;
  return [usd(m.costUsd), ' + ', unknown, ` (${m.unpricedReports} of ${m.reports} reports)`];
}

/** @param {CostsAnswer['models']} rows */
function modelsView(rows) {
  return section('Per model',
    h('p', { class: 'muted' }, 'Usage reported while attempts ran (the usage ledger, for the tasks still kept).'),
    rows.length
      ? table(['Model', 'Spent', 'Tokens in', 'Tokens out', 'Reports'], rows.map((m) => h('tr', { 'data-model': m.model },
        h('td', { class: 'mono' }, m.model || h('span', { class: 'muted' }, '(none named)')), h('td', { class: 'num' }, modelCost(m)),
        h('td', { class: 'num' }, m.tokensIn.toLocaleString()), h('td', { class: 'num' }, m.tokensOut.toLocaleString()),
        h('td', { class: 'num' }, String(m.reports)))), { id: 'spend-models' })
      : empty('No usage reported while attempts ran.'));
}
