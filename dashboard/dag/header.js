// @ts-check
// The DAG page's header: name, status, progress and spend, with its actions (cancel the DAG, re-run its failed tasks).
import { api, errorText } from '../api.js';
import { h, fill, usd, when, progressBar, flash, confirmButton } from '../dom.js';

/** @typedef {import('../../src/wire/dags.js').DagGraphAnswer} DagGraphAnswer */
/** @typedef {import('../../src/wire/dags.js').DagCancelAnswer} DagCancelAnswer */
/** @typedef {import('../../src/wire/tasks.js').RerunAnswer} RerunAnswer */

/**
 * The header, and `show` to fill it from the DAG's graph.
 * @param {string} dagId
 * @param {HTMLElement} msg where an action that failed says why
 * @param {() => void} reload the page, once an action is done
 */
export function dagHeader(dagId, msg, reload) {
  const head = h('div', { class: 'page-head' }, h('h1', null, 'DAG'));
  const statusEl = h('span', { id: 'dag-status', class: 'badge' });
  const progressSlot = h('div', { class: 'dag-progress' });
  const facts = h('div', { class: 'facts' });
  const cancelBtn = confirmButton('Cancel DAG', { 'data-action': 'dag-cancel' }, async () => {
    try {
      const r = /** @type {DagCancelAnswer} */ (await api('POST', `/api/dags/${encodeURIComponent(dagId)}/cancel`, { note: 'cancelled from the dashboard' }));
      flash(`Cancelled ${r.cancelled} task(s).`);
      reload();
    } catch (err) {
      msg.textContent = errorText(err);
    }
  });
  // A DAG's dead-lettered and cancelled tasks run again (a blocked or cancelled DAG runs on).
  const rerunBtn = h('button', { type: 'button', 'data-action': 'dag-rerun-failed', hidden: true }, 'Re-run failed');
  rerunBtn.addEventListener('click', async () => {
    rerunBtn.disabled = true;
    try {
      const r = /** @type {RerunAnswer} */ (await api('POST', `/api/dags/${encodeURIComponent(dagId)}/rerun`, { from_failed: true }));
      flash(`Running again: ${r.reopened.map((t) => t.key).join(', ')}.`);
      reload();
    } catch (err) {
      msg.textContent = errorText(err);
    } finally {
      rerunBtn.disabled = false;
    }
  });
  const title = h('h1', null, 'DAG');
  const subtitle = h('div', { class: 'muted small' });
  fill(head, h('div', { class: 'head-row' }, title, statusEl, h('span', { class: 'spacer' }), rerunBtn, cancelBtn), subtitle, progressSlot, facts);

  /** @param {string} status */
  const showStatus = (status) => {
    statusEl.textContent = status;
    statusEl.className = `badge status-${status}`;
    statusEl.dataset.status = status;
    cancelBtn.hidden = status === 'completed' || status === 'cancelled';
  };

  /** @param {DagGraphAnswer} g */
  const show = (g) => {
    const { dag } = g;
    title.textContent = dag.name;
    fill(subtitle, dag.title ? `${dag.title} · ` : '', h('span', { class: 'mono' }, dag.id));
    showStatus(dag.status);
    /** @type {Record<string, number>} */
    const counts = {};
    for (const n of g.nodes) counts[n.status] = (counts[n.status] ?? 0) + 1;
    rerunBtn.hidden = !(counts.dead_lettered || counts.cancelled);
    fill(progressSlot, progressBar(counts, dag.tasksTotal));
    fill(facts,
      h('span', null, 'Spent ', usd(dag.spentUsd), dag.budgetUsd != null ? ` of ${usd(dag.budgetUsd)}` : ''),
      h('span', null, 'Open tasks ', String(dag.tasksOpen), ' of ', String(dag.tasksTotal)),
      h('span', null, 'Created ', when(dag.createdAt)),
      dag.blockedReason ? h('span', { class: 'error' }, dag.blockedReason) : null);
  };
  return { el: head, show };
}
