import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';

async function run(argv: string[]) {
  let stdout = '';
  const code = await main(argv, { stdout: (s) => { stdout += s; }, stderr: () => {}, env: process.env });
  return { code, stdout };
}

describe('dagent schema', () => {
  it('prints the JSON Schema generated from the zod schema, and docs/dag.schema.json is up to date', async () => {
    const { code, stdout } = await run(['schema']);
    expect(code).toBe(0);
    const schema = JSON.parse(stdout);
    expect(schema.required).toEqual(expect.arrayContaining(['name', 'tasks']));
    expect(Object.keys(schema.properties.tasks.additionalProperties.properties)).toEqual(expect.arrayContaining(['type', 'depends_on', 'retry', 'spec']));
    expect(JSON.parse(readFileSync('docs/dag.schema.json', 'utf8'))).toEqual(schema);
  });
});
