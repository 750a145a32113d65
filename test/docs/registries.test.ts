// The registries list each loop and step kind once (src/maintenance/index.ts, src/validation/steps/index.ts); the docs
// name them by hand: these tests hold the loop table, the banners the docs show and the list of step kinds to them.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { LOOP_NAMES, LOOPS_ELECTED } from '../../src/maintenance/index.js';

describe('the maintenance loops in the docs', () => {
  it('docs/operations.md has one row per loop of the registry, and says which ones run on every process', () => {
    const doc = readFileSync('docs/operations.md', 'utf8');
    const table = doc.slice(doc.indexOf('| Loop | Interval | Batch | Work per tick |'));
    const rows = table.split('\n').slice(2).filter((l, i, all) => all.slice(0, i + 1).every((x) => x.startsWith('|')));
    expect(rows.map((r) => r.split('|')[1]!.trim()).sort()).toEqual([...LOOP_NAMES].sort());
    for (const name of LOOP_NAMES.filter((n) => !LOOPS_ELECTED.includes(n))) {
      const row = rows.find((r) => r.split('|')[1]!.trim() === name)!;
      expect(row, `${name} is not behind a lease`).toMatch(/Not (gated|behind a lease)/);
    }
  });

  it('the banners docs/cli.md shows list the registry\'s loops, in its order', () => {
    const doc = readFileSync('docs/cli.md', 'utf8');
    const banners = [...doc.matchAll(/^dagent up: (.+) running;/gm), ...doc.matchAll(/and the maintenance loops \(([^)]+)\)/g)].map((m) => m[1]);
    expect(banners).toHaveLength(2);
    for (const b of banners) expect(b).toBe(LOOP_NAMES.join(', '));
  });
});

describe('the registries docs/architecture.md names', () => {
  it('lists every step kind of STEP_KINDS', async () => {
    const { STEP_KINDS } = await import('../../src/validation/steps/index.js');
    const doc = readFileSync('docs/architecture.md', 'utf8');
    const listed = /one module per kind \(([^)]+)\)/.exec(doc)![1]!.split(',').map((k) => k.trim().replaceAll('`', ''));
    expect(listed).toEqual(STEP_KINDS.map((k) => k.kind));
  });
});
