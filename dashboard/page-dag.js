// @ts-check
// One DAG: header and actions, the graph (recoloured live from the stream),
// its open dead letters and its task table.
import { renderSvg, setNodeStatus, sameShape, STATUS_ORDER, statusLabel } from './graph.js';
import { api, errorText, liveStreams } from './api.js';
import { h, fill, main, link, hrefTask, hrefDlq, badge, table, empty, usd, when, progressBar, flash, confirmButton, pageError } from './dom.js';
import { OFFLINE_POLL_MS } from './live.js';
import { timelineView, costView } from './timeline.js';
import Panzoom from './panzoom.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('../src/wire/dags.js').DagGraphAnswer} DagGraphAnswer */
/** @typedef {import('../src/wire/dags.js').DagTimelineAnswer} DagTimelineAnswer */
/** @typedef {import('../src/wire/dags.js').DagCancelAnswer} DagCancelAnswer */
/** @typedef {import('../src/wire/tasks.js').RerunAnswer} RerunAnswer */

/**
 * The drawing in a frame that pans (drag the background) and zooms (wheel, or the buttons), fitted to the
 * frame's width at first: a 3,000-task DAG is legible as a whole, then as a part.
 * @param {SVGSVGElement} svg
 */
function pannable(svg) {
  const frame = h('div', { class: 'graph-frame' }, svg);
  const width = Number(svg.getAttribute('width'));
  const height = Number(svg.getAttribute('height'));
  // Panzoom measures the element: it starts once the frame is in the page.
  /** @type {import('@panzoom/panzoom').PanzoomObject | undefined} */
  let pz;
  const fit = () => {
    if (!pz) return;
    const scale = Math.min(1, Math.max(0.05, (frame.clientWidth - 8) / width));
    pz.zoom(scale, { animate: false });
    pz.pan(0, 0, { animate: false });
    frame.style.height = `${Math.min(Math.max(160, height * scale + 8), window.innerHeight * 0.7)}px`;
    svg.dataset.scale = String(scale);
  };
  /**
   * @param {string} label
   * @param {string} action
   * @param {() => void} fn
   */
  const button = (label, action, fn) => {
    const b = h('button', { type: 'button', class: 'small', 'data-action': action }, label);
    b.addEventListener('click', () => fn());
    return b;
  };
  const tools = h('div', { class: 'graph-tools' }, button('Fit', 'graph-fit', fit), button('+', 'graph-zoom-in', () => pz?.zoomIn()), button('−', 'graph-zoom-out', () => pz?.zoomOut()));
  requestAnimationFrame(() => {
    if (!frame.isConnected) return;
    const zoomer = Panzoom(svg, { maxScale: 4, minScale: 0.05, step: 0.2, excludeClass: 'panzoom-exclude', origin: '0 0' });
    pz = zoomer;
    frame.addEventListener('wheel', (ev) => zoomer.zoomWithWheel(ev));
    fit();
  });
  return h('div', null, tools, frame);
}

/** The timeline is read again at most this often while the DAG changes (the graph: every 250 ms). */
const TIMELINE_REFETCH_MS = 2_000;

/** Rows of the Tasks table drawn before "Show all": a 3,000-row table takes the browser seconds to lay out. */
export const TASKS_SHOWN = 500;
const URGENT_FIRST = ['dead_lettered', 'failed', 'retrying', 'running', 'claimed', 'validating', 'waiting', 'ready', 'pending', 'completed', 'cancelled'];
/** @param {string} status */
const urgency = (status) => {
  const i = URGENT_FIRST.indexOf(status);
  return i < 0 ? URGENT_FIRST.length : i;
};

function legend() {
  return h('div', { class: 'legend' },
    STATUS_ORDER.map((s) => h('span', { class: 'legend-item' }, h('span', { class: `swatch status-${s}` }), statusLabel(s))),
    h('span', { class: 'legend-item' }, h('span', { class: 'swatch critical' }), 'critical path'));
}

/**
 * @param {PageContext} ctx
 * @param {string} dagId
 */
export function pageDag(ctx, dagId) {
  const head = h('div', { class: 'page-head' }, h('h1', null, 'DAG'));
  const graphBox = h('div', { class: 'graph-box' });
  const dlBox = h('div');
  const tasksBox = h('div');
  const timelineBox = h('div', { id: 'dag-timeline' });
  const costBox = h('div', { id: 'dag-cost' });
  const msg = h('p', { class: 'error', role: 'alert' });
  fill(main, head, msg,
    h('section', { class: 'card' }, h('h2', null, 'Graph'), legend(), graphBox),
    h('section', { class: 'card' }, h('h2', null, 'Timeline'), timelineBox),
    h('section', { class: 'card' }, h('h2', null, 'Cost'), costBox),
    h('section', { class: 'card' }, h('h2', null, 'Open dead letters'), dlBox),
    h('section', { class: 'card flush' }, h('h2', null, 'Tasks'), tasksBox));

  /** @type {DagGraphAnswer | undefined} */
  let graph;
  /** @type {SVGSVGElement | undefined} */
  let svg;
  let allTasks = false;
  /** @type {Map<string, HTMLElement>} */
  const statusCells = new Map();

  const statusEl = h('span', { id: 'dag-status', class: 'badge' });
  const progressSlot = h('div', { class: 'dag-progress' });
  const facts = h('div', { class: 'facts' });
  const cancelBtn = confirmButton('Cancel DAG', { 'data-action': 'dag-cancel' }, async () => {
    try {
      const r = /** @type {DagCancelAnswer} */ (await api('POST', `/api/dags/${encodeURIComponent(dagId)}/cancel`, { note: 'cancelled from the dashboard' }));
      flash(`Cancelled ${r.cancelled} task(s).`);
      void load.now();
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
      void load.now();
    } catch (err) {
      msg.textContent = errorText(err);
    } finally {
      rerunBtn.disabled = false;
    }
  });
  const title = h('h1', null, 'DAG');
  const subtitle = h('div', { class: 'muted small' });
  fill(head, h('div', { class: 'head-row' }, title, statusEl, h('span', { class: 'spacer' }), rerunBtn, cancelBtn), subtitle, progressSlot, facts);

  // A folded group opens its first task (the Tasks table below lists them all).
  /** @param {string} key */
  const nodeClick = (key) => {
    const n = graph?.nodes.find((x) => x.key === key);
    if (n) location.hash = hrefTask(n.id);
  };

  /** @param {string} status */
  const showStatus = (status) => {
    statusEl.textContent = status;
    statusEl.className = `badge status-${status}`;
    statusEl.dataset.status = status;
    cancelBtn.hidden = status === 'completed' || status === 'cancelled';
  };

  /** @param {DagGraphAnswer} g */
  const apply = (g) => {
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

    if (!svg || !sameShape(graph, g)) {
      svg = renderSvg(g, { onNodeClick: nodeClick });
      fill(graphBox, g.nodes.length ? pannable(svg) : empty('This DAG has no tasks.'));
    } else {
      for (const n of g.nodes) setNodeStatus(svg, n.key, n.status);
    }
    graph = g;

    fill(dlBox, g.deadLetters.length === 0 ? empty('None.') : h('ul', { class: 'dl-list' }, g.deadLetters.map((d) => h('li', null,
      link(hrefDlq(d.id), d.taskKey), ' ', h('span', { class: 'chip' }, d.errorClass), ' ', h('span', { class: 'muted' }, d.reason), ' ', when(d.createdAt)))));

    statusCells.clear();
    // By depth; in a DAG too large to list at once, the most urgent first (a failure, what runs), and past
    // TASKS_SHOWN rows a button draws the rest.
    const large = g.nodes.length > TASKS_SHOWN;
    const ordered = [...g.nodes].sort((a, b) => (large ? urgency(a.status) - urgency(b.status) : 0) || a.depth - b.depth || a.key.localeCompare(b.key, undefined, { numeric: true }));
    const shown = allTasks ? ordered : ordered.slice(0, TASKS_SHOWN);
    const more = ordered.length > shown.length ? h('button', { type: 'button', 'data-action': 'tasks-all' }, `Show all ${ordered.length} tasks`) : null;
    more?.addEventListener('click', () => { allTasks = true; apply(/** @type {DagGraphAnswer} */ (graph)); });
    fill(tasksBox, table(['Task', 'Type', 'Status', 'Attempts', 'Priority', 'Claimed by', 'Cost', 'Last error'],
      shown.map((n) => {
        const cell = h('td', null, badge(n.status));
        statusCells.set(n.key, cell);
        return h('tr', { 'data-key': n.key },
          h('td', null, link(hrefTask(n.id), n.key), n.parentKey ? h('span', { class: 'muted small' }, ` ↳ ${n.parentKey}`) : null),
          h('td', null, n.type), cell,
          h('td', { class: 'num' }, `${n.attempts}/${n.maxAttempts}`),
          h('td', { class: 'num', title: `base ${n.priority}` }, Number(n.effectivePriority).toFixed(1)),
          h('td', null, n.claimedBy ?? ''),
          h('td', { class: 'num' }, usd(n.costUsd)),
          h('td', { class: 'small clip' }, n.lastError ?? ''));
      })), more);
  };

  const graphLoad = ctx.refetcher({
    load: () => /** @type {Promise<DagGraphAnswer>} */ (api('GET', `/api/dags/${encodeURIComponent(dagId)}`)),
    apply: (g) => {
      msg.textContent = '';
      apply(g);
    },
    // A DAG that does not exist replaces the page; anything else (the network, say) is said above it, and the
    // refetcher tries again.
    fail: (err) => { if (!graph && err.status === 404) fill(main, pageError(err)); else msg.textContent = errorText(err); },
  });
  // The timeline reads every attempt of the DAG: on its own, at most every TIMELINE_REFETCH_MS, and its failure
  // is its card's alone.
  const timelineLoad = ctx.refetcher({
    load: () => /** @type {Promise<DagTimelineAnswer>} */ (api('GET', `/api/dags/${encodeURIComponent(dagId)}/timeline`)),
    apply: (tl) => {
      fill(timelineBox, timelineView(tl));
      fill(costBox, costView(tl));
    },
    fail: (err) => { if (err.status !== 404) fill(timelineBox, h('p', { class: 'error' }, `Could not load the timeline: ${errorText(err)}`)); },
  }, TIMELINE_REFETCH_MS);
  const load = {
    now: () => Promise.all([graphLoad.now(), timelineLoad.now()]),
    soon: () => { graphLoad.soon(); timelineLoad.soon(); },
  };
  void load.now();
  ctx.every(OFFLINE_POLL_MS, () => { if (liveStreams === 0) load.soon(); });

  /**
   * A status change seen on the stream: recolour now, refetch shortly (header, counts, dead letters).
   * @param {string} key
   * @param {string} status
   */
  const recolour = (key, status) => {
    const n = graph?.nodes.find((x) => x.key === key);
    if (!n || !svg) return false;
    n.status = status;
    setNodeStatus(svg, key, status);
    statusCells.get(key)?.replaceChildren(badge(status));
    return true;
  };

  ctx.stream(`?dag_id=${encodeURIComponent(dagId)}`, (e) => {
    if (e.type === 'snapshot') {
      let unknown = false;
      for (const t of e.data.tasks ?? []) if (!recolour(t.key, t.status)) unknown = true;
      if (unknown) void load.now(); else load.soon();
      return;
    }
    if (e.type === 'task.status') {
      const known = recolour(e.data.key, e.data.status);
      // A task that was not there before (a spawned subtask) needs the graph redrawn.
      if (!known || e.data.previous === null) void load.now(); else load.soon();
      return;
    }
    if (e.type === 'close') return;
    load.soon();
  });
}
