// @ts-check
// One DAG: header and actions, the graph (recoloured live from the stream), its timeline and cost, its open dead
// letters and its task table. The parts: dag/header.js, dag/frame.js (the graph's frame), dag/tasks.js (the table).
import { renderSvg, setNodeStatus, sameShape } from './graph.js';
import { api, errorText, liveStreams } from './api.js';
import { h, fill, main, link, hrefTask, hrefDlq, empty, when, pageError } from './dom.js';
import { OFFLINE_POLL_MS } from './live.js';
import { timelineView, costView } from './timeline.js';
import { dagHeader } from './dag/header.js';
import { legend, pannable } from './dag/frame.js';
import { dagTasksTable } from './dag/tasks.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('./api.js').StreamEvent} StreamEvent */
/** @typedef {import('../src/wire/dags.js').DagGraphAnswer} DagGraphAnswer */
/** @typedef {import('../src/wire/dags.js').DagTimelineAnswer} DagTimelineAnswer */

export { TASKS_SHOWN } from './dag/tasks.js';

/** The timeline is read again at most this often while the DAG changes (the graph: every 250 ms). */
const TIMELINE_REFETCH_MS = 2_000;

/**
 * @param {PageContext} ctx
 * @param {string} dagId
 */
export function pageDag(ctx, dagId) {
  const graphBox = h('div', { class: 'graph-box' });
  const dlBox = h('div');
  const tasksBox = h('div');
  const timelineBox = h('div', { id: 'dag-timeline' });
  const costBox = h('div', { id: 'dag-cost' });
  const msg = h('p', { class: 'error', role: 'alert' });
  const header = dagHeader(dagId, msg, () => void load.now());
  fill(main, header.el, msg,
    h('section', { class: 'card' }, h('h2', null, 'Graph'), legend(), graphBox),
    h('section', { class: 'card' }, h('h2', null, 'Timeline'), timelineBox),
    h('section', { class: 'card' }, h('h2', null, 'Cost'), costBox),
    h('section', { class: 'card' }, h('h2', null, 'Open dead letters'), dlBox),
    h('section', { class: 'card flush' }, h('h2', null, 'Tasks'), tasksBox));

  /** @type {DagGraphAnswer | undefined} */
  let graph;
  /** @type {SVGSVGElement | undefined} */
  let svg;
  const tasks = dagTasksTable(tasksBox, () => apply(/** @type {DagGraphAnswer} */ (graph)));

  // A folded group opens its first task (the Tasks table below lists them all).
  /** @param {string} key */
  const nodeClick = (key) => {
    const n = graph?.nodes.find((x) => x.key === key);
    if (n) location.hash = hrefTask(n.id);
  };

  /** @param {DagGraphAnswer} g */
  const apply = (g) => {
    header.show(g);
    if (!svg || !sameShape(graph, g)) {
      svg = renderSvg(g, { onNodeClick: nodeClick });
      fill(graphBox, g.nodes.length ? pannable(svg) : empty('This DAG has no tasks.'));
    } else {
      for (const n of g.nodes) setNodeStatus(svg, n.key, n.status);
    }
    graph = g;
    fill(dlBox, g.deadLetters.length === 0 ? empty('None.') : h('ul', { class: 'dl-list' }, g.deadLetters.map((d) => h('li', null,
      link(hrefDlq(d.id), d.taskKey), ' ', h('span', { class: 'chip' }, d.errorClass), ' ', h('span', { class: 'muted' }, d.reason), ' ', when(d.createdAt)))));
    tasks.show(g);
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
  const timelineLoad = timelineLoader(ctx, dagId, timelineBox, costBox);
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
    tasks.recolour(key, status);
    return true;
  };
  ctx.stream(`?dag_id=${encodeURIComponent(dagId)}`, (e) => dagEventFollow(e, recolour, load));
}

/**
 * The timeline and cost cards' loads. The timeline reads every attempt of the DAG: on its own, at most every
 * TIMELINE_REFETCH_MS, and its failure is its card's alone.
 * @param {PageContext} ctx
 * @param {string} dagId
 * @param {HTMLElement} timelineBox
 * @param {HTMLElement} costBox
 */
function timelineLoader(ctx, dagId, timelineBox, costBox) {
  return ctx.refetcher({
    load: () => /** @type {Promise<DagTimelineAnswer>} */ (api('GET', `/api/dags/${encodeURIComponent(dagId)}/timeline`)),
    apply: (tl) => {
      fill(timelineBox, timelineView(tl));
      fill(costBox, costView(tl));
    },
    fail: (err) => { if (err.status !== 404) fill(timelineBox, h('p', { class: 'error' }, `Could not load the timeline: ${errorText(err)}`)); },
  }, TIMELINE_REFETCH_MS);
}

/**
 * What the DAG's stream says, followed: a task's new status is recoloured at once (its snapshot's too); a task not
 * drawn yet (a spawned subtask) redraws now; anything else refetches shortly.
 * @param {StreamEvent} e
 * @param {(key: string, status: string) => boolean} recolour false when the task is not drawn
 * @param {{ now: () => Promise<unknown>, soon: () => void }} load
 */
function dagEventFollow(e, recolour, load) {
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
}
