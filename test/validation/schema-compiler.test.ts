import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/config/index.js';
import { schemaCacheSize, schemaCompile, schemaCompilerHeld } from '../../src/validation/schema-compiler.js';

// One shared ajv instance kept every schema it compiled, and its validate function, for the life of the
// process (20,015 functions after 20,000 distinct schemas while the cache held 500): a server's heap grew
// with every DAG submitted. Each compiled schema now lives in an instance of its own, freed with its entry.

/** A schema of some weight (formats, bounds, a nested $id), different for each `i`. */
const schemaNumbered = (i: number) => ({
  $id: `https://example.com/held-${i}.json`,
  type: 'object',
  required: [`f${i}`],
  properties: {
    mail: { type: 'string', format: 'email' },
    count: { type: 'integer', minimum: i },
    tags: { type: 'array', items: { type: 'string', maxLength: 40 }, uniqueItems: true },
    nested: { $id: `https://example.com/held-${i}-nested.json`, type: 'object', additionalProperties: false, properties: { at: { type: 'string', format: 'date-time' } } },
  },
});

/** The heap in use after a full collection, in MB. */
function heapAfterGcMb(): number {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  gc();
  gc();
  return process.memoryUsage().heapUsed / 1024 / 1024;
}

describe('compiled JSON Schemas do not outlive their cache entry', () => {
  it('after 3,000 more distinct schemas than the cache holds, the compiler holds no more instances, functions or heap than with the cache just full', () => {
    let n = 0;
    // The cache full (600 > 500), and every lazily built part (meta-schemas, formats) in place.
    for (; n < 600; n++) expect(schemaCompile(schemaNumbered(n))).not.toHaveProperty('error');
    const full = schemaCompilerHeld();
    const heapFull = heapAfterGcMb();
    for (; n < 3_600; n++) expect(schemaCompile(schemaNumbered(n))).not.toHaveProperty('error');
    const after = schemaCompilerHeld();
    const heapAfter = heapAfterGcMb();
    console.log(`held with the cache full: ${JSON.stringify(full)}; after 3,000 more: ${JSON.stringify(after)}; heap ${heapFull.toFixed(1)} → ${heapAfter.toFixed(1)} MB`);
    expect(schemaCacheSize()).toBe(LIMITS.schemaCacheEntries);
    // One instance per cache entry, and the meta-schema checker (one dialect here).
    expect(after.instances).toBeLessThanOrEqual(LIMITS.schemaCacheEntries + 1);
    expect(after).toEqual(full);
    // Kept, each compile held ~8 KB (3,000: ~25 MB).
    expect(heapAfter - heapFull).toBeLessThan(6);
  });

  it('an evicted schema compiles again with the same $id, and still checks outputs', () => {
    const first = schemaCompile(schemaNumbered(0));
    expect(first).not.toHaveProperty('error');
    const check = (first as { validate: (v: unknown) => Array<{ pointer: string; message: string }> }).validate;
    expect(check({ f0: 1, mail: 'a@example.com' })).toEqual([]);
    expect(check({ mail: 'not mail' }).map((v) => `${v.pointer} ${v.message}`)).toEqual(["/ must have required property 'f0'", '/mail must match format "email"']);
  });
});
