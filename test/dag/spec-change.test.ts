import { describe, expect, it } from 'vitest';
import { dagSpec } from '../helpers/factories.js';
import { specSettingParse, specsChange, taskIsLlm } from '../../src/dag/spec-change.js';
import { canonicalJson } from '../../src/canonical-json.js';

const spec = await dagSpec(`
name: change
tasks:
  named: { type: t, spec: { prompt: P, models: [m1], fallback_models: [m2] } }
  llm: { type: t, spec: { constraints: { capabilities: [llm] } } }
  tool: { type: t, spec: { constraints: { capabilities: [tool] } } }
  signal: { type: t, wait_for: { signal: go } }
  person: { type: t, approval: { prompt: ok? } }
  each: { type: t, for_each: [1, 2], spec: { models: [m1] } }
`);
const byKey = (tasks: typeof spec.tasks) => new Map(tasks.map((t) => [t.key, t]));

describe('what a rerun changes in task specs', () => {
  it('an LLM task names a model or requires llm; a task no agent runs is none', () => {
    expect(spec.tasks.filter(taskIsLlm).map((t) => t.key)).toEqual(['named', 'llm', 'each']);
  });

  it('--model replaces the models and drops the fallbacks of the LLM tasks only; --set TASK.FIELD wins over --set FIELD', () => {
    const settings = [specSettingParse('named.prompt', 'Mine'), specSettingParse('prompt', 'All')];
    const { tasks, changed } = specsChange(spec.tasks, { model: 'm3', settings });
    const t = byKey(tasks);
    expect(changed).toEqual(['named', 'llm', 'each']);
    expect([t.get('named')!.body.models, t.get('named')!.body.fallbackModels, t.get('named')!.body.prompt]).toEqual([['m3'], [], 'Mine']);
    expect([t.get('llm')!.body.models, t.get('llm')!.body.prompt]).toEqual([['m3'], 'All']);
    expect(t.get('tool')).toBe(spec.tasks[2]);
  });

  it('reads command-line text by the field: prompt as it is, others as YAML, one item as a list', () => {
    expect(specSettingParse('prompt', '42', true).value).toBe('42');
    expect(specSettingParse('models', 'gpt-4o', true).value).toEqual(['gpt-4o']);
    expect(specSettingParse('tool.constraints.capabilities', '[b, a, b]', true)).toEqual({ task: 'tool', field: 'constraints.capabilities', value: ['b', 'a', 'b'] });
    expect(specSettingParse('constraints.estimated_tokens', '300k', true).value).toBe('300k');
    expect(specSettingParse('review_api/lint.input', '{ depth: 2 }', true)).toEqual({ task: 'review_api/lint', field: 'input', value: { depth: 2 } });
    const { tasks } = specsChange(spec.tasks, { settings: [specSettingParse('tool.constraints.capabilities', '[b, a, b]', true), specSettingParse('tool.constraints.estimated_tokens', '300k', true)] });
    expect([byKey(tasks).get('tool')!.requiredCapabilities, byKey(tasks).get('tool')!.estimatedTokens]).toEqual([['a', 'b'], 300_000]);
  });

  it('refuses what a DAG file could not say, naming the path', () => {
    const refused: Array<[() => unknown, RegExp]> = [
      [() => specSettingParse('input.a.b', 1), /^set input\.a\.b: name one input field/],
      [() => specSettingParse('input.constructor', 1), /^set input\.constructor: an input field name must match/],
      [() => specSettingParse('prompt.x', 'y'), /^set prompt\.x: prompt has no fields of its own/],
      [() => specSettingParse('Bad.prompt', 'y'), /^set Bad\.prompt: Bad is neither a field/],
      [() => specSettingParse('models', '[a', true), /^set models: not a YAML value/],
      [() => specSettingParse('constraints.heartbeat_sec', 0), /^set constraints\.heartbeat_sec: Too small/],
      [() => specsChange(spec.tasks, { settings: [specSettingParse('signal.prompt', 'x')] }), /^set signal\.prompt: task signal waits for a signal: no agent runs it/],
      [() => specsChange(spec.tasks, { settings: [specSettingParse('person.input', {})] }), /task person waits for a person/],
      [() => specsChange(spec.tasks, { settings: [specSettingParse('each.input.item', 3)] }), /^set each\.input\.item: for_each fills in input\.item for each child of each/],
      [() => specsChange(spec.tasks, { model: 'a b', settings: [] }), /^model: must be a model name/],
    ];
    for (const [call, message] of refused) expect(call).toThrow(message);
  });

  it('a spec is unchanged when it says the same, whatever the key order or an undefined field', () => {
    expect(canonicalJson({ b: 1, a: { d: undefined, c: [2, { y: 1, x: 0 }] } })).toBe(canonicalJson({ a: { c: [2, { x: 0, y: 1 }] }, b: 1 }));
    expect(specsChange(spec.tasks, { settings: [specSettingParse('named.models', ['m1'])] }).changed).toEqual([]);
  });
});
