import { describe, expect, it } from 'vitest';
import { ancestors, cycleFind, dagGraphBuild, dagGraphBuildSliced, topologicalOrder } from '../../src/dag/graph.js';
import { mapSliced } from '../../src/event-loop.js';
import { graphRender } from '../../src/dag/render.js';
import { durationSeconds, instantParse } from '../../src/durations.js';
import { closestMatch } from '../../src/dag/suggest.js';

describe('graph', () => {
  it('finds a cycle and returns its path, first node repeated', () => {
    const g = dagGraphBuild(['a', 'b', 'c', 'd'], [['a', 'b'], ['b', 'c'], ['c', 'a'], ['c', 'd']]);
    expect(cycleFind(g)).toEqual(['a', 'b', 'c', 'a']);
    expect(cycleFind(dagGraphBuild(['x'], [['x', 'x']]))).toEqual(['x', 'x']);
    expect(cycleFind(dagGraphBuild(['a', 'b'], [['a', 'b']]))).toBeUndefined();
  });

  it('builds the same graph in slices, and other work of the process runs between the slices', async () => {
    const nodes = Array.from({ length: 20_000 }, (_, i) => `t${i}`);
    const edges = nodes.slice(1).map((v, i) => [nodes[Math.floor(i / 2)]!, v] as const);
    let turns = 0;
    const ticker = setInterval(() => turns++, 0);
    const sliced = await dagGraphBuildSliced(nodes, edges).finally(() => clearInterval(ticker));
    const whole = dagGraphBuild(nodes, edges);
    const shape = (g: typeof whole) => ({ nodes: g.nodes().join(), edges: g.mapEdges((_e, _a, u, v) => `${u}>${v}`).join() });
    expect(shape(sliced)).toEqual(shape(whole));
    expect(turns).toBeGreaterThan(0);
  });

  it('mapSliced keeps the order and lets a timer run before it ends, once a slice has used its time', async () => {
    const spin = (ms: number) => { for (const until = performance.now() + ms; performance.now() < until;); };
    let ranAt = -1;
    let i = 0;
    setTimeout(() => (ranAt = i), 0);
    const out = await mapSliced(Array.from({ length: 512 }, (_, k) => k), (k) => { spin(0.1); i = k; return k * 2; });
    expect(out).toEqual(Array.from({ length: 512 }, (_, k) => k * 2));
    expect(ranAt).toBeGreaterThan(0);
    expect(ranAt).toBeLessThan(511);
  });

  it('handles a 100,000-task chain without overflowing the stack', () => {
    const n = 100_000;
    const nodes = Array.from({ length: n }, (_, i) => `t${i}`);
    const edges = nodes.slice(1).map((v, i) => [nodes[i]!, v] as const);
    expect(cycleFind(dagGraphBuild(nodes, edges))).toBeUndefined();
    expect(cycleFind(dagGraphBuild(nodes, [...edges, [`t${n - 1}`, 't0']]))).toHaveLength(n + 1);
  });

  it('computes ancestors and a topological order', () => {
    const g = dagGraphBuild(['a', 'b', 'c', 'd'], [['a', 'b'], ['b', 'd'], ['c', 'd']]);
    expect([...ancestors(g, 'd')].sort()).toEqual(['a', 'b', 'c']);
    const order = topologicalOrder(g);
    expect(order.indexOf('a')).toBeLessThan(order.indexOf('b'));
    expect(order.indexOf('b')).toBeLessThan(order.indexOf('d'));
  });

  it('renders mermaid and dot with statuses', () => {
    const nodes = [{ key: 'build-x', status: 'completed' }, { key: 'test', status: 'ready' }];
    const edges = [{ upstream: 'build-x', downstream: 'test' }];
    const m = graphRender('mermaid', 'd', nodes, edges);
    expect(m).toContain('build_dx --> test');
    expect(m).toContain('class test ready');
    const d = graphRender('dot', 'd', nodes, edges);
    expect(d).toContain('"build-x" -> "test";');
    expect(d).toContain('label="test\\nready"');
  });
});

describe('durations and suggestions', () => {
  it('parses durations and instants', () => {
    expect(['500ms', '30s', '5m', '2h', '1d', 7].map((d) => durationSeconds(d))).toEqual([0.5, 30, 300, 7200, 86400, 7]);
    expect(instantParse('2h')).toEqual({ inSeconds: 7200 });
    expect(instantParse('2026-12-01T09:00:00+01:00')).toEqual({ at: '2026-12-01T08:00:00.000Z' });
    expect(instantParse('2026-12-01T09:00:00')).toMatch(/with offset/);
    expect(instantParse('2026-13-45T09:00:00Z')).toMatch(/not a valid date-time/);
  });

  it('suggests the closest name only when it is close', () => {
    expect(closestMatch('biuld', ['build', 'test'])).toBe('build');
    expect(closestMatch('zzzzzz', ['build', 'test'])).toBeUndefined();
  });
});
