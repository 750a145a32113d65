// @ts-check
// The DAG page's task table: by depth; in a DAG too large to list at once, the most urgent first, and past
// TASKS_SHOWN rows a button that draws the rest. Its status cells are recoloured live.
import { h, fill, link, hrefTask, badge, table, usd } from '../dom.js';
import { keyCompare } from '../key-order.js';

/** @typedef {import('../../src/wire/dags.js').DagGraphAnswer} DagGraphAnswer */

/** Rows of the Tasks table drawn before "Show all": a 3,000-row table takes the browser seconds to lay out. */
export const TASKS_SHOWN = 500;
const URGENT_FIRST = ['dead_lettered', 'failed', 'retrying', 'running', 'claimed', 'validating', 'waiting', 'ready', 'pending', 'completed', 'cancelled'];
/** @param {string} status */
const urgency = (status) => {
  const i = URGENT_FIRST.indexOf(status);
  return i < 0 ? URGENT_FIRST.length : i;
};

/**
 * The table in `box`: `show` draws it from the DAG's graph, `recolour` changes one task's status cell.
 * @param {HTMLElement} box
 * @param {() => void} redraw the page, once "Show all" asked for every row
 */
export function dagTasksTable(box, redraw) {
  let allTasks = false;
  /** @type {Map<string, HTMLElement>} */
  const statusCells = new Map();

  /** @param {DagGraphAnswer} g */
  const show = (g) => {
    statusCells.clear();
    const large = g.nodes.length > TASKS_SHOWN;
    const ordered = [...g.nodes].sort((a, b) => (large ? urgency(a.status) - urgency(b.status) : 0) || a.depth - b.depth || keyCompare(a.key, b.key));
    const shown = allTasks ? ordered : ordered.slice(0, TASKS_SHOWN);
    const more = ordered.length > shown.length ? h('button', { type: 'button', 'data-action': 'tasks-all' }, `Show all ${ordered.length} tasks`) : null;
    more?.addEventListener('click', () => { allTasks = true; redraw(); });
    fill(box, table(['Task', 'Type', 'Status', 'Attempts', 'Priority', 'Claimed by', 'Cost', 'Last error'],
      shown.map((n) => {
        const cell = h('td', null, badge(n.status));
        statusCells.set(n.key, cell);
        return h('tr', { 'data-key': n.key },
          h('td', null, link(hrefTask(n.id), n.key), n.parentKey ? h('span', { class: 'muted small' }, ` ↳ ${n.parentKey}`) : null),
          h('td', null, n.type), cell,
          h('td', { class: 'num' }, `${n.attempts}/${n.maxAttempts}`),
          h('td', { class: 'num', title: `base ${n.priority}` }, Number(n.effectivePriority).toFixed(1)),
          h('td', null, n.reusedFrom ? h('span', { class: 'chip', title: `carried over from ${n.reusedFrom}` }, 'reused') : n.claimedBy ?? ''),
          h('td', { class: 'num' }, usd(n.costUsd)),
          h('td', { class: 'small clip' }, n.lastError ?? ''));
      })), more);
  };

  /**
   * @param {string} key
   * @param {string} status
   */
  const recolour = (key, status) => statusCells.get(key)?.replaceChildren(badge(status));
  return { show, recolour };
}
