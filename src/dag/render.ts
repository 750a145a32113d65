/** Text renderings of a DAG for docs and terminals. Pure: nodes and edges in, text out. */
export interface RenderNode { key: string; type?: string; status?: string; /** Shown instead of the key. */ label?: string }
export interface RenderEdge { upstream: string; downstream: string }
export type GraphFormat = 'mermaid' | 'dot';

const STATUS_COLOURS: Record<string, string> = {
  completed: '#b7e4c7', running: '#a9d6e5', claimed: '#a9d6e5', validating: '#cdb4db', ready: '#fff3b0',
  pending: '#e9ecef', created: '#e9ecef', retrying: '#ffd6a5', failed: '#ffadad', dead_lettered: '#ff8fa3', cancelled: '#adb5bd',
};

export function graphRender(format: GraphFormat, title: string, nodes: RenderNode[], edges: RenderEdge[]): string {
  return format === 'dot' ? dot(title, nodes, edges) : mermaid(nodes, edges);
}

/** A key's group: what comes before its first `/` (a template's group, or the parent of spawned or mapped subtasks). */
const groupOf = (key: string): string | undefined => (key.includes('/') ? key.slice(0, key.indexOf('/')) : undefined);

/** Most urgent first: a collapsed group shows the status of its most urgent task. */
const STATUS_URGENCY = ['dead_lettered', 'failed', 'running', 'claimed', 'validating', 'waiting', 'retrying', 'ready', 'pending', 'created', 'completed', 'cancelled'];

/**
 * Each group drawn as one node: a template's group (`review_api/lint`, `review_api/test` → `review_api`, with the
 * count), and a task's subtasks folded into it. Edges inside a group disappear; edges across it join its node.
 */
export function graphCollapse(nodes: RenderNode[], edges: RenderEdge[]): { nodes: RenderNode[]; edges: RenderEdge[] } {
  const own = new Set(nodes.map((n) => n.key));
  const members = new Map<string, RenderNode[]>();
  for (const n of nodes) {
    const g = groupOf(n.key);
    if (g !== undefined && !own.has(g)) members.set(g, [...(members.get(g) ?? []), n]);
  }
  const target = (k: string) => {
    const g = groupOf(k);
    return g === undefined ? k : g;
  };
  // A task with subtasks folded into it shows the most urgent status of them all.
  const subtaskStatuses = new Map<string, string[]>();
  for (const n of nodes) {
    const g = groupOf(n.key);
    if (g !== undefined && own.has(g) && n.status) subtaskStatuses.set(g, [...(subtaskStatuses.get(g) ?? []), n.status]);
  }
  const out: RenderNode[] = [];
  for (const n of nodes) {
    const g = groupOf(n.key);
    if (g === undefined) {
      const statuses = [n.status, ...(subtaskStatuses.get(n.key) ?? [])].filter((x): x is string => !!x);
      const status = STATUS_URGENCY.find((x) => statuses.includes(x)) ?? n.status;
      out.push(subtaskStatuses.has(n.key) ? { ...n, ...(status ? { status } : {}), label: `${n.key} (+${subtaskStatuses.get(n.key)!.length} subtasks)` } : n);
    }
    else if (members.get(g)?.[0] === n) {
      const ms = members.get(g)!;
      const statuses = ms.map((m) => m.status).filter((x): x is string => !!x);
      const status = STATUS_URGENCY.find((x) => statuses.includes(x));
      out.push({ key: g, label: `${g} (${ms.length} tasks)`, ...(status ? { status } : {}) });
    }
  }
  const seen = new Set<string>();
  const folded: RenderEdge[] = [];
  for (const e of edges) {
    const u = target(e.upstream);
    const d = target(e.downstream);
    if (u === d || seen.has(`${u}\0${d}`)) continue;
    seen.add(`${u}\0${d}`);
    folded.push({ upstream: u, downstream: d });
  }
  return { nodes: out, edges: folded };
}

/** The template groups among the nodes (keys `g/…` with no task `g`), drawn as boxes around their tasks. */
function groupsBoxed(nodes: RenderNode[]): Map<string, RenderNode[]> {
  const own = new Set(nodes.map((n) => n.key));
  const boxes = new Map<string, RenderNode[]>();
  for (const n of nodes) {
    const g = groupOf(n.key);
    if (g !== undefined && !own.has(g)) boxes.set(g, [...(boxes.get(g) ?? []), n]);
  }
  return boxes;
}

/** A Mermaid node id for a key, one per key: `_` doubles, `/` is `_s`, `-` is `_d` (so review_api and review/api differ). */
const mermaidId = (k: string) => k.replace(/[^A-Za-z0-9]/g, (c) => (c === '_' ? '__' : c === '/' ? '_s' : c === '-' ? '_d' : `_x${c.codePointAt(0)!.toString(16)}_`));

function mermaid(nodes: RenderNode[], edges: RenderEdge[]): string {
  const lines = ['flowchart TD'];
  const node = (n: RenderNode, indent: string) => `${indent}${mermaidId(n.key)}["${n.label ?? n.key}${n.status ? `<br/><i>${n.status}</i>` : ''}"]`;
  const boxes = groupsBoxed(nodes);
  const boxed = new Set([...boxes.values()].flat());
  for (const n of nodes) if (!boxed.has(n)) lines.push(node(n, '  '));
  for (const [g, ms] of boxes) {
    lines.push(`  subgraph ${mermaidId(g)}_group ["${g}"]`, ...ms.map((n) => node(n, '    ')), '  end');
  }
  for (const e of edges) lines.push(`  ${mermaidId(e.upstream)} --> ${mermaidId(e.downstream)}`);
  const used = new Set(nodes.map((n) => n.status).filter((s): s is string => !!s));
  for (const s of used) lines.push(`  classDef ${s} fill:${STATUS_COLOURS[s] ?? '#ffffff'}`);
  for (const n of nodes) if (n.status) lines.push(`  class ${mermaidId(n.key)} ${n.status}`);
  return lines.join('\n');
}

function dot(title: string, nodes: RenderNode[], edges: RenderEdge[]): string {
  const q = (s: string) => `"${s.replace(/"/g, '\\"')}"`;
  const lines = [`digraph ${q(title)} {`, '  rankdir=TB;', '  node [shape=box, style="rounded,filled", fillcolor="#ffffff"];'];
  const node = (n: RenderNode, indent: string) => {
    const label = n.status ? `${n.label ?? n.key}\\n${n.status}` : n.label ?? n.key;
    return `${indent}${q(n.key)} [label=${q(label)}${n.status ? `, fillcolor=${q(STATUS_COLOURS[n.status] ?? '#ffffff')}` : ''}];`;
  };
  const boxes = groupsBoxed(nodes);
  const boxed = new Set([...boxes.values()].flat());
  for (const n of nodes) if (!boxed.has(n)) lines.push(node(n, '  '));
  for (const [g, ms] of boxes) lines.push(`  subgraph ${q(`cluster_${g}`)} {`, `    label=${q(g)};`, ...ms.map((n) => node(n, '    ')), '  }');
  for (const e of edges) lines.push(`  ${q(e.upstream)} -> ${q(e.downstream)};`);
  lines.push('}');
  return lines.join('\n');
}
