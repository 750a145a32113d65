import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { parse } from 'yaml';
import { dagSourceLoad } from '../../src/dag/load.js';
import { dagFileJsonSchema } from '../../src/cli/submit.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { cyclePathText } from '../../src/errors.js';
import { testDatabase } from '../helpers/db.js';
import { databaseReset, rowsOf } from '../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
beforeEach(() => databaseReset(db));

const reviews = `
name: reviews
x-review: &review
  type: review
  max_attempts: 2
  spec: { models: [openai/gpt-4o], constraints: { capabilities: [llm] } }
tasks:
  api:  { <<: *review, title: Review the API }
  docs: { <<: *review, title: Review the docs, priority: 20, max_attempts: 5 }
  sum:  { type: write, depends_on: [api, docs] }
`;

describe('YAML as people write it', () => {
  it('merge keys apply (the keys beside << win), and top-level x- fields hold anchors without being part of the DAG', async () => {
    const spec = await dagSourceLoad(reviews, 'reviews.yaml');
    const byKey = Object.fromEntries(spec.tasks.map((t) => [t.key, t]));
    expect(byKey.api).toMatchObject({ type: 'review', title: 'Review the API', maxAttempts: 2, requiredCapabilities: ['llm'], body: { models: ['openai/gpt-4o'] } });
    expect(byKey.docs).toMatchObject({ type: 'review', priority: 20, maxAttempts: 5 });
    expect(byKey.sum!.dependsOn).toEqual(['api', 'docs']);
    expect(Object.keys(spec)).not.toContain('x-review');
    // Editors read the same file as valid against the published JSON Schema.
    const validate = new Ajv2020({ strict: false }).compile(dagFileJsonSchema());
    expect(validate(parse(reviews, { merge: true })), JSON.stringify(validate.errors)).toBe(true);
  });

  it('a long cycle is printed with its first and last keys and how many are between', async () => {
    const n = 40;
    const tasks = Array.from({ length: n }, (_, i) => `  t${i}: { type: t, depends_on: [t${(i + n - 1) % n}] }`).join('\n');
    const err = await dagSourceLoad(`name: loop\ntasks:\n${tasks}\n`, 'loop.yaml').catch((e: Error) => e);
    const message = (err as Error).message;
    expect(message).toMatch(/dependency cycle: (t\d+ -> ){6}\(29 more\) -> (t\d+ -> ){5}t\d+/);
    expect(message.length).toBeLessThan(300);
    expect(cyclePathText(['a', 'b', 'a'])).toBe('a -> b -> a');
  });

  it('a 3,000-wide fan-out and join is accepted and created in one transaction', async () => {
    const width = 3000;
    const reviewsYaml = Array.from({ length: width }, (_, i) => `  r${i}: { type: review }`).join('\n');
    const yaml = `name: wide\ntasks:\n${reviewsYaml}\n  synthesis: { type: write, depends_on: [${Array.from({ length: width }, (_, i) => `r${i}`).join(', ')}] }\n`;
    const [r] = await dagSubmit(db, [await dagSourceLoad(yaml, 'wide.yaml')]);
    const [join] = await rowsOf<{ deps_remaining: number; status: string }>(db, sql`select deps_remaining, status from tasks where dag_id = ${r!.dagId} and key = 'synthesis'`);
    expect(join).toEqual({ deps_remaining: width, status: 'pending' });
  });
});
