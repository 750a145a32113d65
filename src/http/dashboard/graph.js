// The DAG drawing: a pure layout (columns by depth, rows ordered to keep edges
// short) and an SVG renderer. No state and no network: app.js owns those.

const SVG_NS = 'http://www.w3.org/2000/svg';

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
 * @param {Array<{upstream: string, downstream: string}>} edges
 * @returns {{positions: Map<string, {x: number, y: number, w: number, h: number, col: number, row: number}>, width: number, height: number}}
 */
export function layout(nodes, edges, sizes = GRAPH_SIZES) {
  const { nodeW, nodeH, colGap, rowGap, pad } = sizes;
  const columns = new Map();
  for (const n of nodes) {
    const d = Number.isFinite(n.depth) && n.depth >= 0 ? n.depth : 0;
    if (!columns.has(d)) columns.set(d, []);
    columns.get(d).push(n.key);
  }
  const upstreamOf = new Map();
  for (const e of edges) {
    if (!upstreamOf.has(e.downstream)) upstreamOf.set(e.downstream, []);
    upstreamOf.get(e.downstream).push(e.upstream);
  }
  const depths = [...columns.keys()].sort((a, b) => a - b);
  const row = new Map();
  for (const d of depths) {
    const keys = columns.get(d);
    const weight = (k) => {
      const ups = (upstreamOf.get(k) ?? []).filter((u) => row.has(u));
      return ups.length ? ups.reduce((s, u) => s + row.get(u), 0) / ups.length : Number.POSITIVE_INFINITY;
    };
    const sorted = d === depths[0]
      ? keys
      : [...keys].map((k, i) => ({ k, i, w: weight(k) })).sort((a, b) => (a.w - b.w) || (a.i - b.i)).map((x) => x.k);
    sorted.forEach((k, i) => row.set(k, i));
    columns.set(d, sorted);
  }
  const tallest = Math.max(1, ...[...columns.values()].map((c) => c.length));
  const fullH = tallest * nodeH + (tallest - 1) * rowGap;
  const positions = new Map();
  depths.forEach((d, col) => {
    const keys = columns.get(d);
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

/** The edges of a path of keys, as "up->down" strings. */
export function pathEdges(path) {
  const set = new Set();
  for (let i = 1; i < path.length; i++) set.add(`${path[i - 1]}->${path[i]}`);
  return set;
}

/** A cubic curve from the right side of `a` to the left side of `b`. */
export function edgePath(a, b) {
  const x1 = a.x + a.w, y1 = a.y + a.h / 2;
  const x2 = b.x - 4, y2 = b.y + b.h / 2;
  const dx = Math.max(24, (x2 - x1) / 2);
  return `M ${x1} ${y1} C ${x1 + dx} ${y1}, ${x2 - dx} ${y2}, ${x2} ${y2}`;
}

function el(name, attrs = {}, children = []) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  for (const c of children) e.append(c);
  return e;
}

function truncate(s, n) {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

/**
 * Draw the graph. Every node is a `<g class="node" data-key data-status>`;
 * critical-path nodes and edges carry the class `critical`.
 * @param {{nodes: Array<{key: string, status: string, title?: string, type?: string, depth: number}>, edges: Array<{upstream: string, downstream: string}>, criticalPath?: string[]}} graph
 * @param {{onNodeClick?: (key: string) => void}} [opts]
 * @returns {SVGSVGElement}
 */
export function renderSvg(graph, opts = {}) {
  const { positions, width, height } = layout(graph.nodes, graph.edges);
  const critical = new Set(graph.criticalPath ?? []);
  const criticalEdges = pathEdges(graph.criticalPath ?? []);
  const svg = el('svg', {
    class: 'dag-graph', width, height, viewBox: `0 0 ${width} ${height}`,
    role: 'img', 'aria-label': `task graph with ${graph.nodes.length} tasks`,
  });
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
    edgeLayer.append(el('path', {
      d: edgePath(a, b), class: isCritical ? 'edge critical' : 'edge',
      'marker-end': isCritical ? 'url(#arrow-critical)' : 'url(#arrow)',
      'data-from': e.upstream, 'data-to': e.downstream,
    }));
  }
  svg.append(edgeLayer);

  const nodeLayer = el('g', { class: 'nodes' });
  for (const n of graph.nodes) {
    const p = positions.get(n.key);
    if (!p) continue;
    const g = el('g', {
      class: `node status-${n.status}${critical.has(n.key) ? ' critical' : ''}`,
      'data-key': n.key, 'data-status': n.status, transform: `translate(${p.x} ${p.y})`,
      tabindex: 0, role: 'link', 'aria-label': `${n.key}: ${n.status}`,
    });
    const tip = el('title');
    tip.textContent = `${n.key}${n.title ? ` — ${n.title}` : ''}\n${n.type ?? ''} · ${n.status}`;
    const label = el('text', { x: 12, y: 19, class: 'node-key' });
    label.textContent = truncate(n.key, 20);
    const sub = el('text', { x: 12, y: 34, class: 'node-sub' });
    sub.textContent = statusLabel(n.status);
    g.append(tip, el('rect', { width: p.w, height: p.h, rx: 9, ry: 9 }), label, sub);
    if (opts.onNodeClick) {
      g.addEventListener('click', () => opts.onNodeClick(n.key));
      g.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') opts.onNodeClick(n.key); });
    }
    nodeLayer.append(g);
  }
  svg.append(nodeLayer);
  return svg;
}

export function statusLabel(status) {
  return String(status).replace(/_/g, ' ');
}

/** Recolour one node in place (a live status change); false if the key is not drawn. */
export function setNodeStatus(svg, key, status) {
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
  if (tip) tip.textContent = tip.textContent.replace(/ · [a-z_]+$/, ` · ${status}`);
  return true;
}

/** The same graph shape (keys and edges), so a redraw is not needed for a status-only change. */
export function sameShape(a, b) {
  if (!a || !b) return false;
  const keys = (g) => g.nodes.map((n) => `${n.key}@${n.depth}`).sort().join(',');
  const edges = (g) => g.edges.map((e) => `${e.upstream}->${e.downstream}`).sort().join(',');
  return keys(a) === keys(b) && edges(a) === edges(b) && (a.criticalPath ?? []).join(',') === (b.criticalPath ?? []).join(',');
}
