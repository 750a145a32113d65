import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { parse } from 'yaml';
import { main } from '../../src/cli/main.js';

async function run(argv: string[]) {
  let stdout = '';
  const code = await main(argv, { stdout: (s) => { stdout += s; }, stderr: () => {}, env: process.env });
  return { code, stdout };
}

const yamlOf = (file: string) => parse(readFileSync(file, 'utf8'), { merge: true }) as unknown;

describe('dagent schema', () => {
  it('prints the JSON Schema generated from the zod schema, and docs/dag.schema.json is up to date', async () => {
    const { code, stdout } = await run(['schema']);
    expect(code).toBe(0);
    const schema = JSON.parse(stdout);
    expect(schema.required).toEqual(expect.arrayContaining(['name', 'tasks']));
    // A task is either a task or a group that uses a template.
    const branches = schema.properties.tasks.additionalProperties.anyOf as Array<{ properties: Record<string, unknown>; required?: string[] }>;
    expect(Object.keys(branches.find((b) => b.required?.includes('type'))!.properties)).toEqual(expect.arrayContaining(['type', 'depends_on', 'retry', 'spec', 'for_each']));
    expect(Object.keys(branches.find((b) => b.required?.includes('use'))!.properties)).toEqual(['use', 'with', 'depends_on', 'tags']);
    expect(JSON.parse(readFileSync('docs/dag.schema.json', 'utf8'))).toEqual(schema);
  });

  it('--template prints the template file\'s schema, and docs/template.schema.json is up to date', async () => {
    const { code, stdout } = await run(['schema', '--template']);
    expect(code).toBe(0);
    const schema = JSON.parse(stdout);
    expect(Object.keys(schema.properties)).toEqual(['title', 'description', 'params', 'tasks']);
    expect(JSON.parse(readFileSync('docs/template.schema.json', 'utf8'))).toEqual(schema);
  });

  it('editors accept the DAG and template files that use groups and for_each, and flag a group with a task\'s field', () => {
    const ajv = new Ajv2020({ strict: false });
    const dag = ajv.compile(JSON.parse(readFileSync('docs/dag.schema.json', 'utf8')));
    const template = ajv.compile(JSON.parse(readFileSync('docs/template.schema.json', 'utf8')));
    for (const f of ['dags/examples/file-reviews.yaml', 'test/fixtures/groups/good.yaml']) expect(dag(yamlOf(f)), `${f}: ${JSON.stringify(dag.errors)}`).toBe(true);
    for (const f of ['dags/templates/review-loop.yaml', 'test/fixtures/groups/templates/review.yaml']) expect(template(yamlOf(f)), `${f}: ${JSON.stringify(template.errors)}`).toBe(true);
    expect(dag(yamlOf('test/fixtures/groups/bad/04-group-field.yaml'))).toBe(false);
  });
});
