import { describe, expect, it } from 'vitest';
import { dagSourceLoad } from '../../src/dag/load.js';
import { DagValidationError } from '../../src/errors.js';

const problemsOf = async (yaml: string, params: Record<string, string> = {}) => {
  try {
    await dagSourceLoad(yaml, 'p.yaml', { params });
    return [];
  } catch (e) {
    if (!(e instanceof DagValidationError)) throw e;
    return e.problems.map((p) => `${p.line}:${p.column} ${p.path}: ${p.message}`);
  }
};

describe('params and file checks', () => {
  it('keeps a whole-string placeholder\'s type and coerces --param to the default\'s type', async () => {
    const spec = await dagSourceLoad('name: p\nparams: { prio: 20, who: bob }\ntasks:\n  a: { type: t, priority: "${params.prio}", title: "hi ${params.who}" }\n', 'p.yaml', { params: { prio: '7' } });
    expect(spec.tasks[0]).toMatchObject({ priority: 7, title: 'hi bob' });
    expect(spec.params).toEqual({ prio: 7, who: 'bob' });
  });

  it('an optional param with no default becomes an empty string; a required one must be given', async () => {
    const spec = await dagSourceLoad('name: p\nparams: { note: { required: false } }\ntasks:\n  a: { type: t, title: "x${params.note}y" }\n', 'p.yaml');
    expect(spec.tasks[0]!.title).toBe('xy');
    expect(await problemsOf('name: p\nparams: { note: { required: true } }\ntasks:\n  a: { type: t, title: "${params.note}" }\n'))
      .toEqual(['2:11 params.note: param "note" has no default and was not given (pass --param note=VALUE)']);
  });

  it('reports a mistyped --param once, not again at every placeholder', async () => {
    expect(await problemsOf('name: p\nparams: { prio: 20 }\ntasks:\n  a: { type: t, priority: "${params.prio}" }\n', { prio: 'high' }))
      .toEqual(['2:17 params.prio: --param prio=high: expected a number']);
  });

  it('refuses malformed placeholders instead of passing them through', async () => {
    expect((await problemsOf('name: p\nparams: { who: bob }\ntasks:\n  a: { type: t, title: "${param.who}" }\n'))[0]).toMatch(/malformed placeholder \$\{param\.who\}/);
  });

  it('accepts date-times without seconds and checks the merged retry policy', async () => {
    expect(await problemsOf('name: p\ntasks:\n  a: { type: t, deadline: "2026-12-01T09:00Z" }\n')).toEqual([]);
    expect(await problemsOf('name: p\ndefaults: { retry: { initial_delay: 30s } }\ntasks:\n  a: { type: t, retry: { max_delay: 10s } }\n'))
      .toEqual(['4:37 tasks.a.retry.max_delay: max_delay is shorter than initial_delay']);
  });
});
