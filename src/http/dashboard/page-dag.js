// One DAG: header and actions, the graph (recoloured live from the stream),
// its open dead letters and its task table.
import { renderSvg, setNodeStatus, sameShape, STATUS_ORDER, statusLabel } from './graph.js';
import { api, errorText, liveStreams } from './api.js';
import { h, fill, main, link, hrefTask, hrefDlq, badge, table, empty, usd, when, progressBar, flash, confirmButton, pageError } from './dom.js';
import { OFFLINE_POLL_MS } from './live.js';
import { timelineView, costView } from './timeline.js';

function legend() {
  return h('div', { class: 'legend' },
    STATUS_ORDER.map((s) => h('span', { class: 'legend-item' }, h('span', { class: `swatch status-${s}` }), statusLabel(s))),
    h('span', { class: 'legend-item' }, h('span', { class: 'swatch critical' }), 'critical path'));
}

export function pageDag(ctx, dagId) {
  const head = h('div', { class: 'page-head' }, h('h1', null, 'DAG'));
  const graphBox = h('div', { class: 'graph-scroll' });
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

  let graph;
  let svg;
  const statusCells = new Map();

  const statusEl = h('span', { id: 'dag-status', class: 'badge' });
  const progressSlot = h('div', { class: 'dag-progress' });
  const facts = h('div', { class: 'facts' });
  const cancelBtn = confirmButton('Cancel DAG', { 'data-action': 'dag-cancel' }, async () => {
    try {
      const r = await api('POST', `/api/dags/${encodeURIComponent(dagId)}/cancel`, { note: 'cancelled from the dashboard' });
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
      const r = await api('POST', `/api/dags/${encodeURIComponent(dagId)}/rerun`, { from_failed: true });
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

  const nodeClick = (key) => {
    const n = graph?.nodes.find((x) => x.key === key);
    if (n) location.hash = hrefTask(n.id);
  };

  const showStatus = (status) => {
    statusEl.textContent = status;
    statusEl.className = `badge status-${status}`;
    statusEl.dataset.status = status;
    cancelBtn.hidden = status === 'completed' || status === 'cancelled';
  };

  const apply = (g) => {
    const { dag } = g;
    title.textContent = dag.name;
    fill(subtitle, dag.title ? `${dag.title} · ` : '', h('span', { class: 'mono' }, dag.id));
    showStatus(dag.status);
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
      fill(graphBox, g.nodes.length ? svg : empty('This DAG has no tasks.'));
    } else {
      for (const n of g.nodes) setNodeStatus(svg, n.key, n.status);
    }
    graph = g;

    fill(dlBox, g.deadLetters.length === 0 ? empty('None.') : h('ul', { class: 'dl-list' }, g.deadLetters.map((d) => h('li', null,
      link(hrefDlq(d.id), d.taskKey), ' ', h('span', { class: 'chip' }, d.errorClass), ' ', h('span', { class: 'muted' }, d.reason), ' ', when(d.createdAt)))));

    statusCells.clear();
    fill(tasksBox, table(['Task', 'Type', 'Status', 'Attempts', 'Priority', 'Claimed by', 'Cost', 'Last error'],
      [...g.nodes].sort((a, b) => a.depth - b.depth || a.key.localeCompare(b.key)).map((n) => {
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
      })));
  };

  const load = ctx.refetcher({
    load: () => Promise.all([api('GET', `/api/dags/${encodeURIComponent(dagId)}`), api('GET', `/api/dags/${encodeURIComponent(dagId)}/timeline`)]),
    apply: ([g, tl]) => {
      msg.textContent = '';
      apply(g);
      fill(timelineBox, timelineView(tl));
      fill(costBox, costView(tl));
    },
    fail: (err) => { if (!graph) fill(main, pageError(err)); else msg.textContent = errorText(err); },
  });
  void load.now();
  ctx.every(OFFLINE_POLL_MS, () => { if (liveStreams === 0) load.soon(); });

  /** A status change seen on the stream: recolour now, refetch shortly (header, counts, dead letters). */
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
