import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { dagFileSchema } from '../../src/dag/file-schema.js';

// docs/dag-yaml.md is written by hand; every field of the file format (from the zod schema
// the loader uses) must have a row in one of its tables, so the reference cannot fall behind.
const doc = readFileSync('docs/dag-yaml.md', 'utf8');
const tableRows = doc.split('\n').filter((l) => l.trimStart().startsWith('|'));

/** Every property name in the JSON Schema, with the first path it was found at. */
function fieldsOf(schema: unknown, at = '', out = new Map<string, string>()): Map<string, string> {
  if (Array.isArray(schema)) { for (const s of schema) fieldsOf(s, at, out); return out; }
  if (schema === null || typeof schema !== 'object') return out;
  const s = schema as Record<string, unknown>;
  for (const [name, sub] of Object.entries((s.properties ?? {}) as Record<string, unknown>)) {
    if (!out.has(name)) out.set(name, `${at}${at ? '.' : ''}${name}`);
    fieldsOf(sub, `${at}${at ? '.' : ''}${name}`, out);
  }
  for (const k of ['items', 'anyOf', 'oneOf', 'allOf', 'additionalProperties', '$defs', 'definitions']) {
    const v = s[k];
    if (k === '$defs' || k === 'definitions') for (const d of Object.values((v ?? {}) as Record<string, unknown>)) fieldsOf(d, at, out);
    else if (v) fieldsOf(v, k === 'items' ? `${at}[]` : at, out);
  }
  return out;
}

describe('docs/dag-yaml.md', () => {
  const fields = fieldsOf(z.toJSONSchema(dagFileSchema, { io: 'input', unrepresentable: 'any' }));

  it('finds the fields of the file format to check', () => {
    expect(fields.size).toBeGreaterThan(40);
    expect(fields.get('budget_usd')).toBe('budget_usd');
  });

  it('has a table row for every field of the file format', () => {
    const missing = [...fields].filter(([name]) => !tableRows.some((row) => row.includes(`\`${name}\``))).map(([, path]) => path);
    expect(missing, `fields with no row in docs/dag-yaml.md: ${missing.join(', ')}`).toEqual([]);
  });
});
