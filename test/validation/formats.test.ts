import { describe, expect, it } from 'vitest';
import formatsModule from 'ajv-formats/dist/formats.js';
import { formatsLinear } from '../../src/validation/formats.js';
import { schemaCompile } from '../../src/validation/schema-compiler.js';

// The linear-time formats must accept and refuse what ajv-formats does on ordinary
// inputs: each sample is run through both and the answers compared.
const full = ((formatsModule as unknown as { default?: typeof formatsModule }).default ?? formatsModule).fullFormats as Record<string, unknown>;
const check = (format: unknown, s: string): boolean => {
  if (format instanceof RegExp) return format.test(s);
  if (typeof format === 'function') return (format as (s: string) => boolean)(s);
  const v = (format as { validate: RegExp | ((s: string) => boolean) }).validate;
  return v instanceof RegExp ? v.test(s) : v(s);
};

const SAMPLES: Record<string, string[]> = {
  url: ['http://example.com', 'https://user:pw@example.com:8080/a/b?c=d#e', 'ftp://files.example.org/x', 'http://10.0.0.1/', 'http://127.0.0.1:80', 'http://192.168.1.1',
    'http://172.16.0.1', 'http://172.15.0.1', 'http://8.8.8.8', 'http://1.2.3.255', 'http://224.0.0.1', 'http://x@169.254.169.254/', 'http://münchen.de', 'http://localhost',
    'mailto:a@b.c', 'http://exa mple.com', 'http://-a.com', 'http://a-.com', 'HTTP://EXAMPLE.COM', 'http://example.c', 'http://a.b-c.de/'],
  hostname: ['example.com', 'example.com.', 'a', 'a-b.c', '-a.com', 'a-.com', `${'a'.repeat(63)}.com`, `${'a'.repeat(64)}.com`, `${'a.'.repeat(126)}a`, `${'a.'.repeat(127)}a`, `${'a.'.repeat(126)}a.`, '', '.', 'exa_mple.com', 'EXAMPLE.com', 'a..b'],
  duration: ['P', 'PT', 'P1Y', 'P1Y2M3D', 'PT1H', 'P1DT2H3M4S', 'P1W', 'P1Y1W', 'PT1H2', 'P1DT', 'p1d', 'P1.5D', 'P1M2Y'],
  email: ['a@b.co', 'first.last+tag@example.org', 'a@b', '@b.co', 'a@', 'a b@c.de', 'a@[1.2.3.4]'],
  ipv4: ['1.2.3.4', '255.255.255.255', '256.1.1.1', '1.2.3', '01.2.3.4'],
  ipv6: ['::1', '2001:db8::1', '::ffff:1.2.3.4', '1::2::3', 'gggg::1', 'fe80::1%eth0'],
  uuid: ['123e4567-e89b-12d3-a456-426614174000', 'urn:uuid:123e4567-e89b-12d3-a456-426614174000', '123e4567e89b12d3a456426614174000', 'xyz'],
  'uri-reference': ['../a/b', 'http://x/y#z', '#frag', 'a b', '%zz'],
  'uri-template': ['http://example.com/{id}', '/{a,b}', '{', '}'],
  'json-pointer': ['', '/a/b', '/a~1b', 'a', '/~2'],
  'relative-json-pointer': ['0', '1/a', '2#', 'a'],
};

describe('formats', () => {
  for (const [name, samples] of Object.entries(SAMPLES)) {
    it(`${name}: the linear check answers as ajv-formats does on ${samples.length} samples`, () => {
      const ours = samples.map((s) => check(formatsLinear()[name], s));
      const theirs = samples.map((s) => check(full[name], s));
      expect(ours).toEqual(theirs);
      // The samples exercise both answers.
      expect(new Set(theirs).size).toBe(2);
    });
  }

  it('every ajv-formats format is defined, and formatMaximum still compares dates', () => {
    expect(Object.keys(formatsLinear()).sort()).toEqual(Object.keys(full).sort());
    const c = schemaCompile({ type: 'string', format: 'date', formatMaximum: '2020-01-01' });
    if ('error' in c) throw new Error(c.error);
    expect(c.validate('2019-12-31')).toEqual([]);
    expect(c.validate('2020-01-02').map((v) => v.message)).toEqual(['should be <= 2020-01-01']);
  });

  it('uniqueItems compares by value: objects whatever their key order, numbers and nested arrays', () => {
    const c = schemaCompile({ type: 'array', uniqueItems: true });
    if ('error' in c) throw new Error(c.error);
    expect(c.validate([{ a: 1, b: [1, 2] }, { b: [1, 2], a: 1 }]).map((v) => v.message)).toEqual(['must NOT have duplicate items (items ## 0 and 1 are identical)']);
    expect(c.validate([1, '1', [1], { 1: 1 }, null, true, 1.5])).toEqual([]);
    expect(c.validate([[1, 2], [2, 1]])).toEqual([]);
    expect(c.validate([null, null]).length).toBe(1);
    const off = schemaCompile({ type: 'array', uniqueItems: false });
    if ('error' in off) throw new Error(off.error);
    expect(off.validate([1, 1])).toEqual([]);
  });
});
