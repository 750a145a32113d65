// @ts-check
// The DAG page's header: name, status, progress and spend, with its actions (cancel the DAG, re-run its failed tasks),
// and where it comes from: the DAG it is a rerun with a change of, and its own reruns, each linked to the compare page.
import { api, errorText } from '../api.js';
import { h, fill, link, usd, when, progressBar, flash, confirmButton, hrefDag, hrefCompare, badge } from '../dom.js';

/** @typedef {import('../../src/wire/dags.js').DagGraphAnswer} DagGraphAnswer */
/** @typedef {import('../../src/wire/dags.js').DagCancelAnswer} DagCancelAnswer */
/** @typedef {import('../../src/wire/tasks.js').RerunAnswer} RerunAnswer */
/** @typedef {import('../../src/wire/dags.js').RerunChangeView} RerunChangeView */

/**
 * What a rerun changed, in words: `model gpt-4o-mini; set draft.prompt: 2 task(s) re-run, 1 reused`.
 * @param {string} of the DAG it re-ran
 * @param {unknown} change its dag.rerunChange
 */
export function rerunSummary(of, change) {
  const c = /** @type {RerunChangeView | null} */ (change);
  if (!c) return `Rerun of ${of}`;
  const what = [...(c.model ? [`model ${c.model}`] : []), ...c.set.map((x) => `set ${x.task ? `${x.task}.` : ''}${x.field}`)].join('; ');
  return `Rerun of ${of} (${what}): ${c.rerunTasks} task(s) re-run, ${c.reusedTasks} reused${c.note ? ` — ${c.note}` : ''}`;
}

/**
 * Where the DAG comes from and what came of it: the DAG it re-ran, and its reruns, each with a link to compare.
 * @param {DagGraphAnswer} g
 */
function lineage(g) {
  const { dag } = g;
  const from = dag.rerunOf ? h('div', { id: 'dag-rerun-of', class: 'small' }, rerunSummary(dag.rerunOf, dag.rerunChange), ' · ',
    link(hrefDag(dag.rerunOf), 'the original'), ' · ', link(hrefCompare(dag.rerunOf, dag.id), 'compare with it')) : null;
  const reruns = g.reruns.length ? h('div', { id: 'dag-reruns', class: 'small' }, 'Reruns: ', g.reruns.flatMap((r, i) => [
    i ? ', ' : '', link(hrefDag(r.id), h('span', { class: 'mono' }, r.id)), ' ', badge(r.status), ' (', link(hrefCompare(dag.id, r.id), 'compare'), ')',
  ])) : null;
  return [from, reruns];
}

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
  const lineageSlot = h('div', { class: 'lineage' });
  fill(head, h('div', { class: 'head-row' }, title, statusEl, h('span', { class: 'spacer' }), rerunBtn, cancelBtn), subtitle, lineageSlot, progressSlot, facts);

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
    fill(lineageSlot, lineage(g));
    fill(progressSlot, progressBar(counts, dag.tasksTotal));
    fill(facts,
      h('span', null, 'Spent ', usd(dag.spentUsd), dag.budgetUsd != null ? ` of ${usd(dag.budgetUsd)}` : ''),
      h('span', null, 'Open tasks ', String(dag.tasksOpen), ' of ', String(dag.tasksTotal)),
      h('span', null, 'Created ', when(dag.createdAt)),
      dag.blockedReason ? h('span', { class: 'error' }, dag.blockedReason) : null);
  };
  return { el: head, show };
}
