import { afterAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { envKept } from '../helpers/env.js';
import { answer, llmServerStart } from '../helpers/llm-server/index.js';
import { rowsOf } from '../helpers/factories.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';
import { dagFileLoad } from '../../src/dag/load.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { dagGet } from '../../src/db/queries/dags.js';
import llm from '../../agents/llm.js';
import validateTest from '../../agents/validate-test.js';
import validateJudge from '../../agents/validate-judge.js';

const database = await testDatabase();
const { db } = database;
const { run } = agentRunners(database, { pollIntervalMs: 100 });
const provider = await llmServerStart();
envKept(['DAGENT_LLM_BASE_URL', 'DAGENT_LLM_API_KEY']);
process.env.DAGENT_LLM_BASE_URL = provider.baseUrl;
process.env.DAGENT_LLM_API_KEY = 'sk-example';
afterAll(async () => {
  await provider.close();
});

describe('dags/validation/release-notes.yaml (every kind of validation step)', () => {
  it('runs to completion with the llm agent and both validation agents, each step recording its verdict', async () => {
    provider.reply = (r) => {
      const text = r.messages.map((m) => m.content).join('\n');
      const reply = text.includes('strict reviewer') ? '{"pass": true, "score": 0.85, "reasons": ["accurate"]}'
        : text.includes('List the user-visible changes') ? 'Faster claims\nFewer retries'
        : text.includes('Write Markdown release notes') ? '# Release 2.0.0\n\n- Faster claims\n- Fewer retries\n'
        : 'dagent 2.0.0 is out';
      return answer.text(reply, { usage: { input: 200, output: 50 } });
    };
    const [submitted] = await dagSubmit(db, [await dagFileLoad('dags/validation/release-notes.yaml', { params: { version: '2.0.0' } })]);
    await Promise.all([run(llm, { id: 'llm-ex' }), run(validateTest, { id: 'test-ex' }), run(validateJudge, { id: 'judge-ex' })]);
    await eventually('DAG completed', async () => (await dagGet(db, submitted!.dagId))?.status === 'completed', 30_000);

    const verdicts = await rowsOf<{ key: string; kinds: string[] | null; passed: boolean[] | null }>(db, sql`
      select t.key, array(select v->>'kind' from jsonb_array_elements(a.details->'verdicts') v) as kinds,
             array(select (v->>'pass')::boolean from jsonb_array_elements(a.details->'verdicts') v) as passed
      from tasks t join attempts a on a.task_id = t.id
      where t.dag_id = ${submitted!.dagId} and t.validates_id is null order by a.ended_at`);
    expect(verdicts).toEqual([
      { key: 'changes', kinds: ['json-schema'], passed: [true] },
      { key: 'notes', kinds: ['json-schema', 'regex', 'test', 'llm-judge'], passed: [true, true, true, true] },
      { key: 'announce', kinds: [], passed: [] },
    ]);
    const [notes] = await rowsOf<{ output: { text: string } }>(db, sql`select output from tasks where dag_id = ${submitted!.dagId} and key = 'notes'`);
    expect(notes!.output.text).toContain('- Fewer retries');
  });
});
