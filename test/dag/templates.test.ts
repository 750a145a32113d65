import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeEach, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { dagFileLoad } from '../../src/dag/load.js';
import { DagValidationError } from '../../src/errors.js';
import { testDatabase } from '../helpers/db.js';
import { databaseReset, databaseSnapshot, rowsOf } from '../helpers/factories.js';
import { sql } from 'drizzle-orm';

/**
 * Task-group templates: test/fixtures/groups/good.yaml uses templates/review.yaml twice; every file in
 * bad/ has one mistake, and its first line says where dagent must point (in the DAG or in the template):
 *   # expect: FILE LINE:COL PATH :: MESSAGE        (FILE relative to test/fixtures/groups; PATH `-` for none)
 */

const database = await testDatabase();
const { db } = database;
beforeEach(() => databaseReset(db));

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DIR = path.join(ROOT, 'test/fixtures/groups');
const rel = (f: string) => path.relative(process.cwd(), f);
const env = { ...process.env, DATABASE_URL: database.url };

async function cli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await main(argv, { stdout: (s) => { stdout += s; }, stderr: (s) => { stderr += s; }, env });
  return { code, stdout, stderr };
}

describe('a DAG that uses a template twice', () => {
  it('expands each group into prefixed tasks, with edges to its first tasks and from its last, and the params filled in', async () => {
    const spec = await dagFileLoad(path.join(DIR, 'good.yaml'));
    expect(spec.tasks.map((t) => t.key)).toEqual([
      'plan', 'review_api/lint', 'review_api/test', 'review_api/fix', 'review_web/lint', 'review_web/test', 'review_web/fix', 'ship',
    ]);
    const byKey = Object.fromEntries(spec.tasks.map((t) => [t.key, t]));
    expect(byKey['review_api/lint']!.dependsOn).toEqual(['plan']);
    expect(byKey['review_api/test']!.dependsOn).toEqual(['review_api/lint']);
    expect(byKey['review_api/fix']!.dependsOn).toEqual(['review_api/test']);
    expect(byKey.ship!.dependsOn).toEqual(['review_api/fix', 'review_web/fix']);
    // Context refs inside the group name the group's tasks; the DAG names them group/key.
    expect(byKey['review_web/test']!.body.context).toEqual(['review_web/lint.findings']);
    expect(byKey.ship!.body.context).toEqual(['review_api/fix.patch', 'review_web/fix.patch']);
    // Each use has its own params: a DAG param passed through `with`, and a default overridden.
    expect(byKey['review_api/lint']!.body).toMatchObject({ prompt: 'Lint src/api', input: { path: 'src/api' }, models: ['openai/gpt-4o'] });
    expect(byKey['review_web/lint']!.body).toMatchObject({ prompt: 'Lint src/web', models: ['anthropic/claude-sonnet-4'] });
    expect(byKey['review_api/lint']!.requiredCapabilities).toEqual(['llm']);
    // The group's tags reach each of its tasks; the other group has none.
    expect(byKey['review_api/test']!.tags).toEqual(['api']);
    expect(byKey['review_web/test']!.tags).toEqual([]);
    // The template's schema_file is read relative to the template.
    const step = (byKey['review_api/fix']!.output as { validation: Array<{ kind: string; schema: unknown }> }).validation[0]!;
    expect(step.kind).toBe('json-schema');
    expect(step.schema).toMatchObject({ required: ['patch'] });
  });

  it('submit creates the expanded tasks and edges; only the first task is READY', async () => {
    const run = await cli(['submit', rel(path.join(DIR, 'good.yaml')), '--param', 'area=lib']);
    expect(run.code, run.stderr).toBe(0);
    const tasks = await rowsOf<{ key: string; status: string; prompt: string | null }>(db, sql`select key, status, spec->>'prompt' as prompt from tasks order by key`);
    expect(tasks.map((t) => t.key)).toEqual([
      'plan', 'review_api/fix', 'review_api/lint', 'review_api/test', 'review_web/fix', 'review_web/lint', 'review_web/test', 'ship',
    ]);
    expect(tasks.filter((t) => t.status === 'ready').map((t) => t.key)).toEqual(['plan']);
    expect(tasks.find((t) => t.key === 'review_web/lint')!.prompt).toBe('Lint lib/web');
    const edges = await rowsOf<{ u: string; d: string }>(db, sql`
      select u.key as u, d.key as d from edges e join tasks u on u.id = e.upstream_id join tasks d on d.id = e.downstream_id order by 1, 2`);
    expect(edges).toEqual([
      { u: 'plan', d: 'review_api/lint' }, { u: 'plan', d: 'review_web/lint' },
      { u: 'review_api/fix', d: 'ship' }, { u: 'review_api/lint', d: 'review_api/test' }, { u: 'review_api/test', d: 'review_api/fix' },
      { u: 'review_web/fix', d: 'ship' }, { u: 'review_web/lint', d: 'review_web/test' }, { u: 'review_web/test', d: 'review_web/fix' },
    ]);
  });

  it('dagent graph draws each group in a box, or collapsed to one node with its edges folded', async () => {
    const file = rel(path.join(DIR, 'good.yaml'));
    const expanded = await cli(['graph', file]);
    expect(expanded.code, expanded.stderr).toBe(0);
    expect(expanded.stdout).toContain('subgraph review__api_group ["review_api"]\n    review__api_slint["review_api/lint"]');
    expect(expanded.stdout).toContain('review__api_sfix --> ship');
    const collapsed = await cli(['graph', file, '--groups', 'collapsed']);
    expect(collapsed.stdout).toContain('review__api["review_api (3 tasks)"]');
    expect(collapsed.stdout).toContain('plan --> review__api\n');
    expect(collapsed.stdout).toContain('review__web --> ship');
    expect(collapsed.stdout).not.toContain('review_api/lint');
    expect(collapsed.stdout).not.toMatch(/review__api --> review__api\b/);
    const dot = await cli(['graph', file, '--format', 'dot']);
    expect(dot.stdout).toContain('subgraph "cluster_review_web" {');
    const bad = await cli(['graph', file, '--groups', 'folded']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--groups must be expanded or collapsed, got folded');
  });
});

const EXPECT = /^# expect: (\S+) (\d+):(\d+) (\S+) :: (.+)$/;
const badFiles = readdirSync(path.join(DIR, 'bad')).filter((f) => f.endsWith('.yaml')).sort();

describe('a mistake in a group or its template', () => {
  it('the corpus covers at least a dozen mistakes', () => expect(badFiles.length).toBeGreaterThanOrEqual(12));

  describe.each(badFiles)('%s', (name) => {
    const file = path.join(DIR, 'bad', name);
    const m = EXPECT.exec(readFileSync(file, 'utf8').split('\n', 1)[0]!)!;
    const e = { file: rel(path.join(DIR, m[1]!)), line: Number(m[2]), column: Number(m[3]), path: m[4] === '-' ? '' : m[4]!, message: m[5]! };

    it(`is refused at ${m[1]}:${e.line}:${e.column} ${m[4]}`, async () => {
      const err = await dagFileLoad(file).then(() => undefined, (x: unknown) => x);
      expect(err).toBeInstanceOf(DagValidationError);
      expect((err as DagValidationError).problems[0]).toEqual({ ...e, message: expect.stringContaining(e.message) });
      // A problem inside a template names the DAG file and line that used it, too.
      if (e.file !== rel(file)) expect((err as DagValidationError).problems[0]!.message).toContain(`used at ${rel(file)}:`);
    });

    it('submit exits 2 and writes nothing', async () => {
      const before = await databaseSnapshot(db);
      const run = await cli(['submit', rel(file)]);
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toContain(`${e.file}:${e.line}:${e.column}`);
      expect(await databaseSnapshot(db)).toEqual(before);
    });
  });
});

describe('a scheduled DAG that uses a template', () => {
  it('each fire reads the template relative to the DAG file, as the submit did', async () => {
    const { scheduleTrigger } = await import('../../src/engine/ops/cron.js');
    const run = await cli(['submit', rel(path.join(DIR, 'nightly.yaml'))]);
    expect(run.code, run.stderr).toBe(0);
    const { dagId } = await scheduleTrigger(db, { tenant: 'default', name: 'nightly-review' });
    const tasks = await rowsOf<{ key: string; prompt: string }>(db, sql`select key, spec->>'prompt' as prompt from tasks where dag_id = ${dagId} order by key`);
    expect(tasks.map((t) => t.key)).toEqual(['review/fix', 'review/lint', 'review/test']);
    expect(tasks.find((t) => t.key === 'review/lint')!.prompt).toMatch(/^Lint src \(\d{4}-\d\d-\d\dT/);
  });
});

describe('graph rendering', () => {
  it('keeps a group\'s task and a task of a like name apart, and a folded task shows its most urgent subtask', async () => {
    const { graphCollapse, graphRender } = await import('../../src/dag/render.js');
    const nodes = [{ key: 'review/api' }, { key: 'review_api' }, { key: 'ship' }];
    const m = graphRender('mermaid', 't', nodes, [{ upstream: 'review_api', downstream: 'ship' }]);
    expect(m).toContain('review_sapi["review/api"]');
    expect(m).toContain('review__api --> ship');
    const folded = graphCollapse(
      [{ key: 'map', status: 'pending' }, { key: 'map/0', status: 'completed' }, { key: 'map/1', status: 'dead_lettered' }],
      [{ upstream: 'map/0', downstream: 'map' }, { upstream: 'map/1', downstream: 'map' }],
    );
    expect(folded.nodes).toEqual([{ key: 'map', status: 'dead_lettered', label: 'map (+2 subtasks)' }]);
    expect(folded.edges).toEqual([]);
  });
});

describe('templates, used many ways', () => {
  it('a param may name the DAG task a group reads; naming it in the group\'s depends_on too is no duplicate', async () => {
    const spec = await dagFileLoad(path.join(DIR, 'from-source.yaml'));
    expect(spec.tasks.map((t) => [t.key, t.dependsOn, t.body.context])).toEqual([
      ['plan', [], []], ['digest/read', ['plan'], ['plan.summary']], ['digest/write', ['digest/read'], []],
    ]);
  });

  it('each use of a template counts against the DAG\'s expansion budget, however its path is spelt', async () => {
    const { mkdtempSync, mkdirSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(path.join(tmpdir(), 'dagent-templates-'));
    mkdirSync(path.join(dir, 't'));
    writeFileSync(path.join(dir, 't', 'big.yaml'), `description: "${'d'.repeat(9_000)}"\ntasks:\n  x: { type: x }\n`);
    const uses = Array.from({ length: 600 }, (_, i) => `  g${i}: { use: ${i % 2 ? 't/../t/big.yaml' : './t/big.yaml'} }`).join('\n');
    writeFileSync(path.join(dir, 'many.yaml'), `name: many\ntasks:\n${uses}\n`);
    const err = await dagFileLoad(path.join(dir, 'many.yaml')).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(DagValidationError);
    const problems = (err as DagValidationError).problems;
    expect(problems).toHaveLength(1);
    expect(problems[0]!.message).toBe('templates expand the DAG to more than 4194304 characters (DAGENT_LIMIT_SPEC_CHARS)');
    expect(problems[0]!.path).toMatch(/^tasks\.g\d+\.use$/);
  });
});
