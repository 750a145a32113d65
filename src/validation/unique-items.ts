import type { ErrorObject, FuncKeywordDefinition, SchemaValidateFunction } from 'ajv';

/**
 * `uniqueItems` in linear time. ajv compares every pair of items unless the schema
 * declares a scalar item type, so `[1, 2, …, 200000]` against `{uniqueItems: true}`
 * is 2·10^10 deep comparisons: the server would stall for minutes on one output.
 * Here each item is written once in a canonical form (object keys sorted; JSON
 * numbers compare by value, as in ajv's deep equality) and looked up in a Map.
 */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

const validate = function uniqueItems(this: unknown, schema: boolean, data: unknown): boolean {
  if (!schema || !Array.isArray(data)) return true;
  const seen = new Map<string, number>();
  for (let i = 0; i < data.length; i++) {
    const key = canonical(data[i]);
    const j = seen.get(key);
    if (j !== undefined) {
      // ajv's own wording and params, so reasons read the same as before.
      const error: Partial<ErrorObject> = { keyword: 'uniqueItems', params: { i, j }, message: `must NOT have duplicate items (items ## ${j} and ${i} are identical)` };
      validate.errors = [error];
      return false;
    }
    seen.set(key, i);
  }
  return true;
} as SchemaValidateFunction;

export const UNIQUE_ITEMS_LINEAR: FuncKeywordDefinition = { keyword: 'uniqueItems', schemaType: 'boolean', errors: true, validate };
