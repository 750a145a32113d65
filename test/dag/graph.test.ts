import { describe, expect, it } from 'vitest';
import { ancestors, cycleFind, dagGraphBuild, topologicalOrder } from '../../src/dag/graph.js';
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
