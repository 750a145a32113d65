/** Text renderings of a DAG for docs and terminals. Pure: nodes and edges in, text out. */
export interface RenderNode { key: string; type?: string; status?: string }
export interface RenderEdge { upstream: string; downstream: string }
export type GraphFormat = 'mermaid' | 'dot';

const STATUS_COLOURS: Record<string, string> = {
  completed: '#b7e4c7', running: '#a9d6e5', claimed: '#a9d6e5', validating: '#cdb4db', ready: '#fff3b0',
  pending: '#e9ecef', created: '#e9ecef', retrying: '#ffd6a5', failed: '#ffadad', dead_lettered: '#ff8fa3', cancelled: '#adb5bd',
};

export function graphRender(format: GraphFormat, title: string, nodes: RenderNode[], edges: RenderEdge[]): string {
  return format === 'dot' ? dot(title, nodes, edges) : mermaid(nodes, edges);
}

const mermaidId = (k: string) => k.replace(/[^A-Za-z0-9_]/g, '_');

function mermaid(nodes: RenderNode[], edges: RenderEdge[]): string {
  const lines = ['flowchart TD'];
  for (const n of nodes) lines.push(`  ${mermaidId(n.key)}["${n.key}${n.status ? `<br/><i>${n.status}</i>` : ''}"]`);
  for (const e of edges) lines.push(`  ${mermaidId(e.upstream)} --> ${mermaidId(e.downstream)}`);
  const used = new Set(nodes.map((n) => n.status).filter((s): s is string => !!s));
  for (const s of used) lines.push(`  classDef ${s} fill:${STATUS_COLOURS[s] ?? '#ffffff'}`);
  for (const n of nodes) if (n.status) lines.push(`  class ${mermaidId(n.key)} ${n.status}`);
  return lines.join('\n');
}

function dot(title: string, nodes: RenderNode[], edges: RenderEdge[]): string {
  const q = (s: string) => `"${s.replace(/"/g, '\\"')}"`;
  const lines = [`digraph ${q(title)} {`, '  rankdir=TB;', '  node [shape=box, style="rounded,filled", fillcolor="#ffffff"];'];
  for (const n of nodes) {
    const label = n.status ? `${n.key}\\n${n.status}` : n.key;
    lines.push(`  ${q(n.key)} [label=${q(label)}${n.status ? `, fillcolor=${q(STATUS_COLOURS[n.status] ?? '#ffffff')}` : ''}];`);
  }
  for (const e of edges) lines.push(`  ${q(e.upstream)} -> ${q(e.downstream)};`);
  lines.push('}');
  return lines.join('\n');
}
