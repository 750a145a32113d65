import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { agentStatusSet } from '../../src/db/queries/agents.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { tenantCreate } from '../../src/engine/ops/tenants.js';
import { cliWith } from '../helpers/cli.js';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { agentCreate, databaseReset, databaseSnapshot, rowsOf } from '../helpers/factories.js';
import { agentRunners } from '../helpers/runners.js';
import validateJudge from '../../agents/validate-judge.js';

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const { runner } = agentRunners(database);
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
beforeEach(() => databaseReset(db));

const dir = mkdtempSync(path.join(tmpdir(), 'dagent-judge-check-'));
function dagFile(name: string, yaml: string): string {
  const file = path.join(dir, `${name}.yaml`);
  writeFileSync(file, yaml);
  return file;
}
const dagCount = async () => (await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from dags`))[0]!.n;

const judged = (name: string, step: string, models = '') => `
name: ${name}
tasks:
  draft:
    type: write
    spec: { prompt: Write it${models ? `, models: [${models}]` : ''} }
    output: { validation: [{ kind: json-schema, schema: { type: object } }, ${step}] }
`;

describe('an llm-judge step is checked against the judges at submit', () => {
  it('is refused while no active judge has one of its models (nothing written); a judge with the model, or *, lets it in', async () => {
    const file = dagFile('named', judged('named', '{ kind: llm-judge, rubric: "Accurate", threshold: 0.7, model: gpt-judge }'));
    const before = await databaseSnapshot(db);
    const none = await cli('submit', file);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('DAG named: draft: llm-judge step 2 needs a judge with one of the models gpt-judge, and no active agent with validate:judge has it');
    expect(await databaseSnapshot(db)).toBe(before);

    await agentCreate(db, 'judge-other', ['validate:judge'], undefined, { models: ['other-model'] });
    await agentCreate(db, 'writer-gpt', ['llm'], undefined, { models: ['gpt-judge'] });
    expect((await cli('submit', file)).code).toBe(2);
    await agentCreate(db, 'judge-gpt', ['validate:judge'], undefined, { models: ['gpt-judge'] });
    const ok = await cli('submit', file);
    expect([ok.code, ok.stderr]).toEqual([0, '']);
    // An offline judge serves nothing.
    await agentStatusSet(db, 'judge-gpt', 'offline');
    expect((await cli('submit', file)).code).toBe(2);
    await agentCreate(db, 'gateway', ['validate:judge'], undefined, { models: ['*'] });
    expect((await cli('submit', file)).code).toBe(0);
  });

  it('a step that names no model needs a judge with one of the task\'s models; spawn templates are checked too', async () => {
    await agentCreate(db, 'judge-b', ['validate:judge'], undefined, { models: ['model-b'] });
    const fromTask = dagFile('from-task', judged('from-task', '{ kind: llm-judge, rubric: "Accurate", threshold: 0.5 }', 'model-a, model-b'));
    expect((await cli('submit', fromTask)).code).toBe(0);
    const unserved = dagFile('unserved', judged('unserved', '{ kind: llm-judge, rubric: "Accurate", threshold: 0.5 }', 'model-c'));
    const r = await cli('submit', unserved);
    expect([r.code, r.stderr]).toEqual([2, expect.stringContaining('needs a judge with one of the models model-c')]);
    const template = dagFile('template', `
name: template
tasks:
  plan: { type: plan }
spawn:
  templates:
    review:
      type: review
      output: { validation: { kind: llm-judge, rubric: "Fair", threshold: 0.5, model: model-z } }
`);
    const t = await cli('submit', template);
    expect([t.code, t.stderr]).toEqual([2, expect.stringContaining('DAG template: spawn.templates.review: llm-judge step 1 needs a judge with one of the models model-z')]);
  });

  it('--force (?force=true) submits anyway with a warning; over HTTP the refusal is a 400 that changes nothing', async () => {
    const yaml = judged('forced', '{ kind: llm-judge, rubric: "Accurate", threshold: 0.7, model: gpt-judge }');
    const forced = await cli('submit', '--force', dagFile('forced', yaml));
    expect(forced.code).toBe(0);
    expect(forced.stderr).toContain('warning: DAG forced: draft: llm-judge step 2 needs a judge');
    expect(await dagCount()).toBe(1);

    const before = await databaseSnapshot(db);
    const refused = await http.call('POST', '/api/dags', { raw: yaml, contentType: 'application/yaml' });
    expect([refused.status, refused.body.error.code]).toEqual([400, 'INVALID_INPUT']);
    expect(await databaseSnapshot(db)).toBe(before);
    const accepted = await http.call('POST', '/api/dags?force=true', { raw: yaml, contentType: 'application/yaml' });
    expect(accepted.status).toBe(201);
    expect(accepted.body.results[0].warnings).toEqual([expect.stringContaining('needs a judge with one of the models gpt-judge')]);
  });

  it('a judge whose provider key is missing does not start, so the DAG that needs it is refused at submit', async () => {
    const saved = { ...process.env };
    const file = dagFile('keyed', judged('keyed', '{ kind: llm-judge, rubric: "Accurate", threshold: 0.7, model: gpt-judge }'));
    try {
      delete process.env.DAGENT_LLM_API_KEY;
      delete process.env.OPENAI_API_KEY;
      process.env.DAGENT_LLM_BASE_URL = 'https://llm.example.invalid/v1';
      const judge = runner({ ...validateJudge, models: ['gpt-judge'] }, { id: 'judge-no-key' });
      await expect(judge.start()).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        message: 'agent validate-judge cannot start: no API key for https://llm.example.invalid/v1: set DAGENT_LLM_API_KEY (or OPENAI_API_KEY), or DAGENT_LLM_BASE_URL to a local endpoint',
      });
      expect(await rowsOf(db, sql`select id from agents`)).toEqual([]);
      expect((await cli('submit', file)).stderr).toContain('llm-judge step 2 needs a judge with one of the models gpt-judge');

      // With its key, the same judge starts, registers, and the DAG is accepted.
      process.env.DAGENT_LLM_API_KEY = 'sk-test';
      await runner({ ...validateJudge, models: ['gpt-judge'] }, { id: 'judge-with-key' }).start();
      expect((await cli('submit', file)).code).toBe(0);
    } finally {
      for (const k of ['DAGENT_LLM_API_KEY', 'OPENAI_API_KEY', 'DAGENT_LLM_BASE_URL']) {
        if (saved[k] === undefined) delete process.env[k]; else process.env[k] = saved[k];
      }
    }
  });

  it('counts only the judges that serve the DAG\'s tenant: one of another tenant does not let it in', async () => {
    await tenantCreate(db, { id: 'team-a' });
    await tenantCreate(db, { id: 'team-b' });
    await agentRegister(db, { id: 'judge-b', type: 'judge', capabilities: ['validate:judge'], models: ['gpt-judge'], tenants: ['team-b'] });
    const file = dagFile('tenanted', judged('tenanted', '{ kind: llm-judge, rubric: "Accurate", threshold: 0.7, model: gpt-judge }'));
    const before = await databaseSnapshot(db);
    const intoA = await cli('submit', '--tenant', 'team-a', file);
    expect(intoA.code, intoA.stderr).toBe(2);
    expect(intoA.stderr).toContain('no active agent with validate:judge has it');
    expect(await databaseSnapshot(db)).toBe(before);
    expect((await cli('submit', '--tenant', 'team-b', file)).code).toBe(0);
  });
});

