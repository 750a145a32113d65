import { describe, expect, it } from 'vitest';
import { jsonProblem, jsonTextTooDeep, utf8Decode } from '../../src/json-guard.js';

describe('json guard (pure)', () => {
  it('names the path of a NUL, an unpaired surrogate, a __proto__ key and nesting past the limit', () => {
    expect(jsonProblem({ a: [1, 'x\u0000y'] }, 64)).toEqual({ path: ['a', 1], message: expect.stringMatching(/NUL/) });
    expect(jsonProblem({ a: { b: 'x\ud800' } }, 64)).toEqual({ path: ['a', 'b'], message: expect.stringMatching(/surrogate/) });
    expect(jsonProblem(JSON.parse('{"a": {"__proto__": {"x": 1}}}'), 64)).toEqual({ path: ['a', '__proto__'], message: expect.stringMatching(/__proto__/) });
    let deep: unknown = 'leaf';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(jsonProblem(deep, 64)?.message).toMatch(/deeper than 64/);
    expect(jsonProblem({ ok: ['fine', { 'é': '日本' }], constructor: 'a normal key in data' }, 64)).toBeNull();
  });

  it('sees depth in raw text without parsing it, ignoring brackets inside strings', () => {
    expect(jsonTextTooDeep('['.repeat(65) + ']'.repeat(65), 64)).toBe(true);
    expect(jsonTextTooDeep(`{"a": "${'['.repeat(100)}\\"["}`, 64)).toBe(false);
  });

  it('finds the first byte that is not UTF-8', () => {
    expect(utf8Decode(Buffer.from('héllo'))).toEqual({ text: 'héllo' });
    expect(utf8Decode(Buffer.from([0x61, 0x62, 0xc3, 0xa9, 0xff, 0x61]))).toEqual({ invalidAt: 4 });
  });
});
