import { afterAll } from 'vitest';

/**
 * These environment variables as they were when the test file loaded, put back (set or unset) after its tests;
 * `clear()` unsets them all, for a test that sets only what it needs.
 */
export function envKept(keys: readonly string[]): { clear(): void } {
  const before = new Map(keys.map((k) => [k, process.env[k]]));
  afterAll(() => {
    for (const [k, v] of before) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
  return { clear: () => { for (const k of keys) delete process.env[k]; } };
}
