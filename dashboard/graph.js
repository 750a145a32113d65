// @ts-check
// The DAG drawing: large fan-outs folded into one node each, a layered layout by dagre (a column layout
// beyond GRAPH_DAGRE_MAX nodes, where dagre would take seconds), and an SVG renderer. No network: the page owns it.
import dagre from './dagre.js';
import { keyCompare } from './key-order.js';

/**
 * What the drawing is given: a DAG's graph (GET /api/dags/:id), or any graph of keyed nodes with depths.
 * @typedef {{ key: string, status: string, depth: number, type?: string, title?: string | null, parentKey?: string | null }} GraphNode
 * @typedef {{ upstream: string, downstream: string }} GraphEdge
 * @typedef {{ nodes: GraphNode[], edges: GraphEdge[], criticalPath?: string[] }} Graph
 */
/**
 * A node as drawn: a task, or a folded group of `group` tasks from `first` to `last`.
 * @typedef {GraphNode & { group?: number, first?: string, last?: string }} DrawnNode
 */
/**
 * A group's tasks' statuses by key, with their counts by status once counted (groupCounts).
 * @typedef {Map<string, string> & { counts?: Record<string, number> }} GroupStatuses
 */
/**
 * A graph with its fan-outs folded (collapse), and once drawn its group nodes' elements.
 * @typedef {{ nodes: DrawnNode[], edges: GraphEdge[], criticalPath: string[], groupOf: Map<string, string>, members: Map<string, GroupStatuses>, groupEls?: Map<string, SVGGElement> }} Collapsed
 */
/** @typedef {{ x: number, y: number, w: number, h: number }} Box */
/** @typedef {typeof GRAPH_SIZES} GraphSizes */

const SVG_NS = 'http://www.w3.org/2000/svg';

/** Tasks with the same parent, upstream and downstream tasks are drawn as one node from this many on. */
export const GRAPH_COLLAPSE_MIN = 12;
/** Beyond this many nodes (after folding), the quick column layout instead of dagre's. */
export const GRAPH_DAGRE_MAX = 1500;
/** A folded node shows the most urgent status among its tasks: the first of these any of them has. */
const URGENCY = ['dead_lettered', 'failed', 'retrying', 'running', 'claimed', 'validating', 'waiting', 'ready', 'pending', 'completed', 'cancelled'];

/** Sizes of the drawing, in SVG user units. */
export const GRAPH_SIZES = { nodeW: 168, nodeH: 44, colGap: 72, rowGap: 18, pad: 20 };

/** Statuses in the legend, in the order a task usually goes through them. */
export const STATUS_ORDER = ['pending', 'ready', 'claimed', 'running', 'validating', 'waiting', 'completed', 'retrying', 'failed', 'dead_lettered', 'cancelled'];

/**
 * Where each node goes: one column per depth (longest path from a root, as the
 * API computes it), rows within a column. Columns after the first are ordered by
 * the mean row of each node's upstream tasks (one barycentre pass), which keeps
 * most edges short without a full crossing-minimisation.
 * @param {Array<{key: string, depth: number}>} nodes
 * @param {GraphEdge[]} edges
 * @param {GraphSizes} [sizes]
 * @returns {{positions: Map<string, Box & {col?: number, row?: number}>, width: number, height: number}}
 */
export function columnLayout(nodes, edges, sizes = GRAPH_SIZES) {
  const { nodeW, nodeH, colGap, rowGap, pad } = sizes;
  /** @type {Map<number, string[]>} */
  const columns = new Map();
  for (const n of nodes) {
    const d = Number.isFinite(n.depth) && n.depth >= 0 ? n.depth : 0;
    if (!columns.has(d)) columns.set(d, []);
    /** @type {string[]} */ (columns.get(d)).push(n.key);
  }
  /** @type {Map<string, string[]>} */
  const upstreamOf = new Map();
  for (const e of edges) {
    if (!upstreamOf.has(e.downstream)) upstreamOf.set(e.downstream, []);
    /** @type {string[]} */ (upstreamOf.get(e.downstream)).push(e.upstream);
  }
  const depths = [...columns.keys()].sort((a, b) => a - b);
  /** @type {Map<string, number>} */
  const row = new Map();
  for (const d of depths) {
    const keys = /** @type {string[]} */ (columns.get(d));
    /** @param {string} k */
    const weight = (k) => {
      const ups = (upstreamOf.get(k) ?? []).filter((u) => row.has(u));
      return ups.length ? ups.reduce((s, u) => s + /** @type {number} */ (row.get(u)), 0) / ups.length : Number.POSITIVE_INFINITY;
    };
    const sorted = d === depths[0]
      ? keys
      : [...keys].map((k, i) => ({ k, i, w: weight(k) })).sort((a, b) => (a.w - b.w) || (a.i - b.i)).map((x) => x.k);
    sorted.forEach((k, i) => row.set(k, i));
    columns.set(d, sorted);
  }
  const tallest = Math.max(1, ...[...columns.values()].map((c) => c.length));
  const fullH = tallest * nodeH + (tallest - 1) * rowGap;
  /** @type {Map<string, Box & {col: number, row: number}>} */
  const positions = new Map();
  depths.forEach((d, col) => {
    const keys = /** @type {string[]} */ (columns.get(d));
    const colH = keys.length * nodeH + (keys.length - 1) * rowGap;
    const top = pad + (fullH - colH) / 2; // centre short columns
    keys.forEach((k, r) => {
      positions.set(k, { x: pad + col * (nodeW + colGap), y: top + r * (nodeH + rowGap), w: nodeW, h: nodeH, col, row: r });
    });
  });
  return {
    positions,
    width: pad * 2 + Math.max(1, depths.length) * nodeW + Math.max(0, depths.length - 1) * colGap,
    height: pad * 2 + fullH,
  };
}

/**
 * Where each node goes, and each edge's route: dagre's layered layout, left to right, for graphs up to
 * GRAPH_DAGRE_MAX nodes; the column layout (straight curves between columns) beyond.
 * @param {Array<{key: string, depth: number}>} nodes
 * @param {GraphEdge[]} edges
 * @param {GraphSizes} [sizes]
 * @returns {{positions: Map<string, Box>, routes: Map<string, Array<{x: number, y: number}> | undefined>, width: number, height: number}}
 */
export function layout(nodes, edges, sizes = GRAPH_SIZES) {
  if (nodes.length > GRAPH_DAGRE_MAX) return { ...columnLayout(nodes, edges, sizes), routes: new Map() };
  const { nodeW, nodeH, colGap, rowGap, pad } = sizes;
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'LR', nodesep: rowGap, ranksep: colGap, marginx: pad, marginy: pad });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of nodes) g.setNode(n.key, { width: nodeW, height: nodeH });
  for (const e of edges) if (g.hasNode(e.upstream) && g.hasNode(e.downstream)) g.setEdge(e.upstream, e.downstream);
  dagre.layout(g);
  /** @type {Map<string, Box>} */
  const positions = new Map();
  for (const n of nodes) {
    const p = g.node(n.key);
    positions.set(n.key, { x: p.x - nodeW / 2, y: p.y - nodeH / 2, w: nodeW, h: nodeH });
  }
  /** @type {Map<string, Array<{x: number, y: number}> | undefined>} */
  const routes = new Map();
  for (const e of g.edges()) routes.set(`${e.v}->${e.w}`, g.edge(e).points);
  const size = g.graph();
  return { positions, routes, width: Math.max(size.width ?? 0, nodeW + 2 * pad), height: Math.max(size.height ?? 0, nodeH + 2 * pad) };
}

/**
 * Fold fan-outs: tasks that share their parent, their upstream and their downstream tasks (a map's children,
 * the reviewers between a plan and a join), GRAPH_COLLAPSE_MIN or more of them, become one node with their
 * count and statuses. Returns the graph to draw and which group each folded task is in.
 * @param {Graph} graph
 * @returns {Collapsed}
 */
export function collapse(graph, min = GRAPH_COLLAPSE_MIN) {
  /** @type {Map<string, string[]>} */
  const ups = new Map();
  /** @type {Map<string, string[]>} */
  const downs = new Map();
  for (const e of graph.edges) {
    (ups.get(e.downstream) ?? /** @type {string[]} */ (ups.set(e.downstream, []).get(e.downstream))).push(e.upstream);
    (downs.get(e.upstream) ?? /** @type {string[]} */ (downs.set(e.upstream, []).get(e.upstream))).push(e.downstream);
  }
  /** @type {Map<string, GraphNode[]>} */
  const bySignature = new Map();
  for (const n of graph.nodes) {
    const sig = `${n.parentKey ?? ''}|${[...(ups.get(n.key) ?? [])].sort().join(',')}|${[...(downs.get(n.key) ?? [])].sort().join(',')}`;
    (bySignature.get(sig) ?? /** @type {GraphNode[]} */ (bySignature.set(sig, []).get(sig))).push(n);
  }
  /** @type {Map<string, string>} */
  const groupOf = new Map();
  /** @type {Map<string, GroupStatuses>} */
  const members = new Map();
  /** @type {DrawnNode[]} */
  const nodes = [];
  for (const list of bySignature.values()) {
    if (list.length < min) { nodes.push(...list); continue; }
    list.sort((a, b) => keyCompare(a.key, b.key));
    const [head] = /** @type {[GraphNode]} */ (list);
    // A space: no task key has one, so a group's key never names a task.
    const key = `group ${head.key}`;
    /** @type {GroupStatuses} */
    const statuses = new Map(list.map((m) => [m.key, m.status]));
    members.set(key, statuses);
    for (const m of list) groupOf.set(m.key, key);
    nodes.push({ key, group: list.length, status: groupStatus(statuses), depth: head.depth, type: head.type, first: head.key, last: /** @type {GraphNode} */ (list.at(-1)).key });
  }
  /** @param {string} k */
  const at = (k) => groupOf.get(k) ?? k;
  const seen = new Set();
  /** @type {GraphEdge[]} */
  const edges = [];
  for (const e of graph.edges) {
    const [u, d] = [at(e.upstream), at(e.downstream)];
    if (u === d || seen.has(`${u}->${d}`)) continue;
    seen.add(`${u}->${d}`);
    edges.push({ upstream: u, downstream: d });
  }
  const criticalPath = (graph.criticalPath ?? []).map(at).filter((k, i, all) => i === 0 || all[i - 1] !== k);
  return { nodes, edges, criticalPath, groupOf, members };
}

/**
 * The counts by status of a group's tasks (kept up to date as they change: setNodeStatus), and the most urgent status among them.
 * @param {GroupStatuses} statuses
 */
function groupCounts(statuses) {
  if (statuses.counts) return statuses.counts;
  /** @type {Record<string, number>} */
  const counts = {};
  for (const st of statuses.values()) counts[st] = (counts[st] ?? 0) + 1;
  statuses.counts = counts;
  return counts;
}
/** @param {GroupStatuses} statuses */
function groupStatus(statuses) {
  const counts = groupCounts(statuses);
  return URGENCY.find((st) => counts[st]) ?? Object.keys(counts).find((st) => counts[st]) ?? 'pending';
}
/** @param {GroupStatuses} statuses */
function groupSummary(statuses) {
  return Object.entries(groupCounts(statuses)).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]).map(([st, n]) => `${n} ${statusLabel(st)}`).join(' · ');
}

/** A drawn graph's folded groups (renderSvg), for live recolouring. */
/** @type {WeakMap<SVGSVGElement, Collapsed>} */
const drawnGroups = new WeakMap();

/**
 * The edges of a path of keys, as "up->down" strings.
 * @param {string[]} path
 */
export function pathEdges(path) {
  const set = new Set();
  for (let i = 1; i < path.length; i++) set.add(`${path[i - 1]}->${path[i]}`);
  return set;
}

/**
 * A cubic curve from the right side of `a` to the left side of `b`.
 * @param {Box} a
 * @param {Box} b
 */
export function edgePath(a, b) {
  const x1 = a.x + a.w, y1 = a.y + a.h / 2;
  const x2 = b.x - 4, y2 = b.y + b.h / 2;
  const dx = Math.max(24, (x2 - x1) / 2);
  return `M ${x1} ${y1} C ${x1 + dx} ${y1}, ${x2 - dx} ${y2}, ${x2} ${y2}`;
}

/**
 * A path through dagre's route points, its corners rounded by quadratic curves.
 * @param {Array<{x: number, y: number}>} points
 */
function routePath(points) {
  if (points.length < 2) return '';
  const [first] = /** @type {[{x: number, y: number}]} */ (points);
  let d = `M ${first.x} ${first.y}`;
  for (let i = 1; i < points.length - 1; i++) {
    const [p, q] = /** @type {[{x: number, y: number}, {x: number, y: number}]} */ ([points[i], points[i + 1]]);
    d += ` Q ${p.x} ${p.y} ${(p.x + q.x) / 2} ${(p.y + q.y) / 2}`;
  }
  const last = /** @type {{x: number, y: number}} */ (points.at(-1));
  return `${d} L ${last.x} ${last.y}`;
}

/**
 * @param {string} name
 * @param {Record<string, unknown>} [attrs]
 * @param {Node[]} [children]
 */
function el(name, attrs = {}, children = []) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  for (const c of children) e.append(c);
  return e;
}

/**
 * @param {string} s
 * @param {number} n
 */
function truncate(s, n) {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

/**
 * Draw the graph. Every node is a `<g class="node" data-key data-status>`;
 * critical-path nodes and edges carry the class `critical`.
 * @param {Graph} full
 * @param {{onNodeClick?: (key: string, group?: string) => void}} [opts]
 * @returns {SVGSVGElement}
 */
export function renderSvg(full, opts = {}) {
  const graph = collapse(full);
  const { positions, routes, width, height } = layout(graph.nodes, graph.edges);
  const critical = new Set(graph.criticalPath);
  const criticalEdges = pathEdges(graph.criticalPath);
  const svg = /** @type {SVGSVGElement} */ (el('svg', {
    class: 'dag-graph', width, height, viewBox: `0 0 ${width} ${height}`,
    role: 'img', 'aria-label': `task graph with ${full.nodes.length} tasks`,
  }));
  drawnGroups.set(svg, graph);
  svg.append(el('defs', {}, [
    el('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, [
      el('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead' }),
    ]),
    el('marker', { id: 'arrow-critical', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 5, markerHeight: 5, orient: 'auto-start-reverse' }, [
      el('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead critical' }),
    ]),
  ]));

  const edgeLayer = el('g', { class: 'edges' });
  // Critical edges last, so they are drawn over the others.
  const sorted = [...graph.edges].sort((a, b) =>
    Number(criticalEdges.has(`${a.upstream}->${a.downstream}`)) - Number(criticalEdges.has(`${b.upstream}->${b.downstream}`)));
  for (const e of sorted) {
    const a = positions.get(e.upstream), b = positions.get(e.downstream);
    if (!a || !b) continue;
    const isCritical = criticalEdges.has(`${e.upstream}->${e.downstream}`);
    const route = routes.get(`${e.upstream}->${e.downstream}`);
    edgeLayer.append(el('path', {
      d: route ? routePath(route) : edgePath(a, b), class: isCritical ? 'edge critical' : 'edge',
      'marker-end': isCritical ? 'url(#arrow-critical)' : 'url(#arrow)',
      'data-from': e.upstream, 'data-to': e.downstream,
    }));
  }
  svg.append(edgeLayer);

  const nodeLayer = el('g', { class: 'nodes' });
  for (const n of graph.nodes) {
    const p = positions.get(n.key);
    if (!p) continue;
    const g = /** @type {SVGGElement} */ (el('g', {
      class: `node panzoom-exclude${n.group ? ' group' : ''} status-${n.status}${critical.has(n.key) ? ' critical' : ''}`,
      'data-key': n.key, 'data-status': n.status, 'data-group': n.group, transform: `translate(${p.x} ${p.y})`,
      tabindex: 0, role: 'link', 'aria-label': n.group ? `${n.group} tasks ${n.first} to ${n.last}: ${groupSummary(membersOf(graph, n.key))}` : `${n.key}: ${n.status}`,
    }));
    const tip = el('title');
    tip.textContent = n.group
      ? `${n.group} tasks, ${n.first} … ${n.last}\n${groupSummary(membersOf(graph, n.key))}`
      : `${n.key}${n.title ? ` — ${n.title}` : ''}\n${n.type ?? ''} · ${n.status}`;
    const label = el('text', { x: 12, y: 19, class: 'node-key' });
    label.textContent = n.group ? truncate(`${n.group} × ${n.first}…`, 22) : truncate(n.key, 20);
    const sub = el('text', { x: 12, y: 34, class: 'node-sub' });
    sub.textContent = n.group ? truncate(groupSummary(membersOf(graph, n.key)), 26) : statusLabel(n.status);
    g.append(tip, el('rect', { width: p.w, height: p.h, rx: 9, ry: 9 }), label, sub);
    const target = n.group ? /** @type {string} */ (n.first) : n.key;
    const onNodeClick = opts.onNodeClick;
    if (onNodeClick) {
      g.addEventListener('click', () => onNodeClick(target, n.group ? n.key : undefined));
      g.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') onNodeClick(target, n.group ? n.key : undefined); });
    }
    if (n.group) (graph.groupEls ??= new Map()).set(n.key, g);
    nodeLayer.append(g);
  }
  svg.append(nodeLayer);
  return svg;
}

/**
 * The statuses of group `key`'s tasks.
 * @param {Collapsed} graph
 * @param {string} key
 */
function membersOf(graph, key) {
  return /** @type {GroupStatuses} */ (graph.members.get(key));
}

/** @param {string} status */
export function statusLabel(status) {
  return String(status).replace(/_/g, ' ');
}

/**
 * Recolour one node in place (a live status change), or the group it is folded into; false if it is not drawn.
 * @param {SVGSVGElement} svg
 * @param {string} key
 * @param {string} status
 */
export function setNodeStatus(svg, key, status) {
  const drawn = drawnGroups.get(svg);
  const group = drawn?.groupOf.get(key);
  if (drawn && group) {
    const statuses = membersOf(drawn, group);
    const before = /** @type {string} */ (statuses.get(key));
    if (before === status) return true;
    const counts = groupCounts(statuses);
    counts[before] -= 1;
    counts[status] = (counts[status] ?? 0) + 1;
    statuses.set(key, status);
    const g = drawn.groupEls?.get(group);
    if (!g) return false;
    const next = groupStatus(statuses);
    g.classList.remove(`status-${g.getAttribute('data-status')}`);
    g.classList.add(`status-${next}`);
    g.setAttribute('data-status', next);
    const sub = g.querySelector('.node-sub');
    if (sub) sub.textContent = truncate(groupSummary(statuses), 26);
    const n = /** @type {DrawnNode} */ (drawn.nodes.find((x) => x.key === group));
    g.setAttribute('aria-label', `${n.group} tasks ${n.first} to ${n.last}: ${groupSummary(statuses)}`);
    const tip = g.querySelector('title');
    if (tip) tip.textContent = `${n.group} tasks, ${n.first} … ${n.last}\n${groupSummary(statuses)}`;
    return true;
  }
  const g = [...svg.querySelectorAll('g.node')].find((x) => x.getAttribute('data-key') === key);
  if (!g) return false;
  const prev = g.getAttribute('data-status');
  if (prev === status) return true;
  g.setAttribute('data-status', status);
  g.classList.remove(`status-${prev}`);
  g.classList.add(`status-${status}`);
  g.setAttribute('aria-label', `${key}: ${status}`);
  const sub = g.querySelector('.node-sub');
  if (sub) sub.textContent = statusLabel(status);
  const tip = g.querySelector('title');
  if (tip) tip.textContent = (tip.textContent ?? '').replace(/ · [a-z_]+$/, ` · ${status}`);
  return true;
}

/**
 * The same graph shape (keys and edges), so a redraw is not needed for a status-only change.
 * @param {Graph | undefined} a
 * @param {Graph | undefined} b
 */
export function sameShape(a, b) {
  if (!a || !b) return false;
  /** @param {Graph} g */
  const keys = (g) => g.nodes.map((n) => `${n.key}@${n.depth}`).sort().join(',');
  /** @param {Graph} g */
  const edges = (g) => g.edges.map((e) => `${e.upstream}->${e.downstream}`).sort().join(',');
  return keys(a) === keys(b) && edges(a) === edges(b) && (a.criticalPath ?? []).join(',') === (b.criticalPath ?? []).join(',');
}
