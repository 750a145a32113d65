import { describe, expect, it } from 'vitest';
import { CRASH_SHARED_MAX, crashBlame } from '../../../src/engine/attempt/crash-blame.js';

describe('who a crash is charged to', () => {
  it('a task alone when its agent died is charged', () => {
    expect(crashBlame('t', ['t'], [])).toMatchObject({ charged: true, why: expect.stringMatching(/only task/) });
  });

  it('tasks that died together for the first time are spared', () => {
    for (const id of ['bomb', 'a', 'b']) expect(crashBlame(id, ['bomb', 'a', 'b'], []).charged).toBe(false);
  });

  it('the one task common to two crashes with different company is charged; the new company is spared', () => {
    expect(crashBlame('bomb', ['bomb', 'c', 'd'], [{ charged: false, with: ['a', 'b'] }]))
      .toMatchObject({ charged: true, why: expect.stringMatching(/only task common/) });
    expect(crashBlame('c', ['bomb', 'c', 'd'], []).charged).toBe(false);
  });

  it('tasks that always die together are spared until the bound, then charged', () => {
    const history = (n: number) => Array.from({ length: n }, () => ({ charged: false, with: ['b'] }));
    expect(crashBlame('a', ['a', 'b'], history(CRASH_SHARED_MAX - 1)).charged).toBe(false);
    expect(crashBlame('a', ['a', 'b'], history(CRASH_SHARED_MAX))).toMatchObject({ charged: true, why: expect.stringMatching(/already spared 3 times/) });
  });

  it('a task that crashed alone before and now dies in company is charged', () => {
    expect(crashBlame('t', ['t', 'x'], [{ charged: true, with: [] }]).charged).toBe(true);
  });

  it('an earlier crash whose company was not recorded is no evidence', () => {
    expect(crashBlame('t', ['t', 'x'], [{ charged: true, with: null }]).charged).toBe(false);
  });
});
