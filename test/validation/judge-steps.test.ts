import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { envKept } from '../helpers/env.js';
import { cliWith } from '../helpers/cli.js';
import { agentCreate, dagCreate, databaseReset, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { answer, llmServerStart } from '../helpers/llm-server/index.js';
import { agentRunners } from '../helpers/runners.js';
import { eventually } from '../helpers/wait.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { promoterCreate } from '../../src/maintenance/promoter.js';
import validateJudge from '../../agents/validate-judge.js';

const database = await testDatabase();
const { db } = database;
const { run } = agentRunners(database, { pollIntervalMs: 100 });
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
const provider = await llmServerStart();
const promoter = promoterCreate({ db, intervalMs: 100 });

const ENV = { DAGENT_LLM_BASE_URL: provider.baseUrl, DAGENT_LLM_API_KEY: 'sk-judge', DAGENT_LLM_PRICES: JSON.stringify({ 'judge-1': { input: 1, output: 2 } }) };
envKept(Object.keys(ENV));
Object.assign(process.env, ENV);
promoter.start();
afterAll(async () => {
  await promoter.stop();
  await provider.close();
});

beforeEach(async () => {
  await databaseReset(db);
  provider.reset();
});

/** The judge's answers, in order, streamed; the last one repeats. Each is billed 1,000 tokens in and 100 out. */
function judgeAnswers(...answers: string[]): void {
  let i = 0;
  provider.reply = () => answer.text(answers[Math.min(i++, answers.length - 1)]!, { usage: { input: 1_000, output: 100 } });
}

const writer = defineAgent({ name: 'writer', capabilities: ['write'], run: async (task) => ({ summary: `draft of ${task.key}` }) });

const DAG = (extra = '') => `
name: essay
tasks:
  draft:
    type: llm
    ${extra}
    spec: { prompt: "Summarize the release", constraints: { capabilities: [write] } }
    output:
      validation: { kind: llm-judge, rubric: "Is it a clear one-line summary?", threshold: 0.7, model: judge-1 }
  publish: { type: t, depends_on: [draft], spec: { constraints: { capabilities: [write] } } }
`;

interface Attempt { key: string; agent_id: string; outcome: string; error_class: string | null; error_message: string | null; cost_usd: number }
const attempts = (dagId: string) => rowsOf<Attempt>(db, sql`
  select t.key, a.agent_id, a.outcome, a.error_class, a.error_message, a.cost_usd::float8 as cost_usd
  from attempts a join tasks t on t.id = a.task_id where t.dag_id = ${dagId} order by t.created_at, a.fence`);

describe('llm-judge validation steps, against a local OpenAI-compatible server', () => {
  it('a score at or above the threshold completes the task; the judge sees rubric and output, and its cost counts against the DAG', async () => {
    judgeAnswers('{"pass": true, "score": 0.9, "reasons": ["clear and short"]}');
    const dagId = await dagCreate(db, DAG());
    await run(writer, { id: 'writer-1' });
    await run(validateJudge, { id: 'judge-agent-1' });
    await eventually('draft completed', async () => (await taskStatusByKey(db, dagId)).draft === 'completed');
    expect(await taskStatusByKey(db, dagId)).toMatchObject({ publish: expect.stringMatching(/ready|claimed|running|completed/) });

    expect(provider.seen).toHaveLength(1);
    expect(provider.seen[0]!.model).toBe('judge-1');
    const prompt = provider.seen[0]!.messages.map((m) => m.content).join('\n');
    expect(prompt).toContain('Is it a clear one-line summary?');
    expect(prompt).toContain('"summary": "draft of draft"');
    expect(prompt).toContain('Summarize the release');
    // 1,000 tokens in at $1/M + 100 out at $2/M.
    const judgeCost = 0.0012;
    expect((await dagGet(db, dagId))!.spentUsd).toBeCloseTo(judgeCost, 6);
    const [draft] = await rowsOf<{ verdicts: Array<{ kind: string; pass: boolean; score: number; reasons: string[] }> }>(db, sql`
      select a.details->'verdicts' as verdicts from attempts a join tasks t on t.id = a.task_id where t.dag_id = ${dagId} and t.key = 'draft'`);
    expect(draft!.verdicts).toEqual([expect.objectContaining({ kind: 'llm-judge', pass: true, score: 0.9, reasons: ['score 0.9 ≥ threshold 0.7', 'clear and short'] })]);
    // The judge's call is a durable step of its validation task (a retry would replay it), and its answer was streamed.
    const judged = await rowsOf<{ step: string; streamed: string }>(db, sql`
      select s.name as step, (select string_agg(c.data, '' order by c.seq) from task_stream_chunks c where c.task_id = t.id and c.name = 'output') as streamed
      from tasks t join task_steps s on s.task_id = t.id where t.dag_id = ${dagId} and t.key like 'draft/validate-1@%'`);
    expect(judged).toEqual([{ step: expect.stringMatching(/^model call 1 judge-1 [0-9a-f]{16}$/), streamed: '{"pass": true, "score": 0.9, "reasons": ["clear and short"]}' }]);
  });

  it('a score below the threshold fails the task as invalid_output, whatever the judge said about passing', async () => {
    judgeAnswers('{"pass": true, "score": 0.4, "reasons": ["vague"]}');
    const dagId = await dagCreate(db, DAG('max_attempts: 1'));
    await run(writer, { id: 'writer-2' });
    await run(validateJudge, { id: 'judge-agent-2' });
    await eventually('draft dead-lettered', async () => (await taskStatusByKey(db, dagId)).draft === 'dead_lettered');
    const draft = (await attempts(dagId)).filter((a) => a.key === 'draft');
    expect(draft).toEqual([expect.objectContaining({ agent_id: 'writer-2', outcome: 'failed', error_class: 'invalid_output' })]);
    expect(draft[0]!.error_message).toBe('llm-judge step 1 rejected the output: score 0.4 < threshold 0.7; vague');
  });

  it('an answer that is not valid JSON is a crashed validation: retried as a validation task, the task keeps its attempts', async () => {
    judgeAnswers('Looks fine to me!', '{"pass": true, "score": 0.8, "reasons": []}');
    const dagId = await dagCreate(db, DAG('max_attempts: 1'));
    await run(writer, { id: 'writer-3' });
    await run(validateJudge, { id: 'judge-agent-3' });
    await eventually('draft completed', async () => (await taskStatusByKey(db, dagId)).draft === 'completed');
    const rows = await attempts(dagId);
    // With max_attempts 1, a consumed attempt would have dead-lettered the draft.
    expect(rows.filter((a) => a.key === 'draft').map((a) => a.outcome)).toEqual(['completed']);
    const judged = rows.filter((a) => a.key.startsWith('draft/validate-1@'));
    expect(judged.map((a) => [a.outcome, a.error_class])).toEqual([['failed', 'judge_invalid_answer'], ['completed', null]]);
    expect(judged[0]!.error_message).toContain('judge answer is not JSON: Looks fine to me!');
    const [task] = await rowsOf<{ attempts: number }>(db, sql`select attempts from tasks where dag_id = ${dagId} and key = 'draft'`);
    expect(task!.attempts).toBe(1);
    // The judge's retry asks anew, naming what was wrong with its answer, rather than replaying the recorded call.
    expect(provider.seen).toHaveLength(2);
    const prompts = provider.seen.map((s) => s.messages.map((m) => m.content).join('\n'));
    expect(prompts[0]).not.toContain('Earlier attempts');
    expect(prompts[1]).toContain('judge_invalid_answer: judge answer is not JSON: Looks fine to me!');
  });

  it('a judge that keeps rejecting stops before the call the DAG\'s budget cannot pay: two judge calls fit, the third is not made', async () => {
    // Each judge call is estimated at up to 1,000 tokens out at $2/M plus its prompt (well under 1,000 tokens in at
    // $1/M): about $0.0021; each is charged $0.0012. After two, $0.0012 of the $0.0036 is left: too little for a third.
    const before = process.env.DAGENT_LLM_MAX_OUTPUT_TOKENS;
    process.env.DAGENT_LLM_MAX_OUTPUT_TOKENS = '1000';
    try {
      judgeAnswers('{"pass": false, "score": 0.2, "reasons": ["too long"]}');
      const dagId = await dagCreate(db, DAG('max_attempts: 5\n    retry: { strategy: immediate }').replace('name: essay\n', 'name: essay\nbudget_usd: 0.0036\n'));
      await run(writer, { id: 'writer-5' });
      await run(validateJudge, { id: 'judge-agent-5' });
      // The third judgement is dead-lettered (budget_exceeded is not retried): the draft waits on it, the DAG shows blocked.
      await eventually('the third judgement dead-lettered', async () => (await taskStatusByKey(db, dagId))['draft/validate-1@3'] === 'dead_lettered');
      expect(await taskStatusByKey(db, dagId)).toMatchObject({ draft: 'validating', publish: 'pending' });
      expect((await dagGet(db, dagId))!.status).toBe('blocked');
      expect(provider.seen).toHaveLength(2);
      expect(provider.seen.map((s) => s.body.max_tokens)).toEqual([1000, 1000]);
      const judged = (await attempts(dagId)).filter((a) => a.key.startsWith('draft/validate-1@'));
      expect(judged.map((a) => [a.outcome, a.error_class, a.cost_usd])).toEqual([
        ['completed', null, 0.0012], ['completed', null, 0.0012], ['failed', 'budget_exceeded', 0],
      ]);
      expect(judged[2]!.error_message).toMatch(/^no call to judge-1: it may spend \$0\.002\d* and \d+ tokens \(\d+ estimated in, up to 1000 out\); the attempt has \$0\.0012 left$/);
      expect((await dagGet(db, dagId))!.spentUsd).toBeCloseTo(0.0024, 9);
    } finally {
      if (before === undefined) delete process.env.DAGENT_LLM_MAX_OUTPUT_TOKENS;
      else process.env.DAGENT_LLM_MAX_OUTPUT_TOKENS = before;
    }
  });

  it('failing validation 3 times on 2 distinct agents dead-letters the task as a poison pill, every verdict in dlq show', async () => {
    judgeAnswers('{"pass": false, "score": 0.1, "reasons": ["off topic"]}');
    const dagId = await dagCreate(db, DAG('max_attempts: 10\n    retry: { strategy: immediate }'));
    await run(validateJudge, { id: 'judge-agent-4' });
    // The agents under validation are driven by hand, so which one produced each output is certain.
    await agentCreate(db, 'writer-a', ['write']);
    await agentCreate(db, 'writer-b', ['write']);
    for (const [i, agentId] of ['writer-a', 'writer-b', 'writer-a'].entries()) {
      const [t] = await eventually(`draft claimable (${i + 1})`, async () => {
        const claimed = await taskClaim(db, agentId);
        return claimed.length ? claimed : null;
      });
      expect(t!.key).toBe('draft');
      expect((await taskComplete(db, { taskId: t!.id, fence: t!.fence, output: { summary: `try ${i + 1}` } })).settled?.status).toBe('validating');
      await eventually(`verdict ${i + 1}`, async () => (await attempts(dagId)).filter((a) => a.key === 'draft' && a.outcome === 'failed').length === i + 1);
    }
    expect((await taskStatusByKey(db, dagId)).draft).toBe('dead_lettered');

    const draft = (await attempts(dagId)).filter((x) => x.key === 'draft');
    expect(draft.map((x) => [x.agent_id, x.outcome, x.error_class])).toEqual([
      ['writer-a', 'failed', 'invalid_output'], ['writer-b', 'failed', 'invalid_output'], ['writer-a', 'failed', 'invalid_output'],
    ]);
    const list = await cli('dlq', 'list', '--json');
    const [entry] = list.json() as Array<{ id: string; poisonPill: boolean; reason: string }>;
    expect(entry).toMatchObject({ poisonPill: true, reason: 'poison pill: failed 3 times on 2 distinct agents' });
    const show = await cli('dlq', 'show', entry!.id);
    expect(show.code).toBe(0);
    const verdictSection = show.stdout.split('validation verdicts:')[1] ?? '';
    const verdictLines = verdictSection.split('\n').filter((l) => l.includes('llm-judge'));
    expect(verdictLines).toHaveLength(3);
    for (const [i, line] of verdictLines.entries()) expect(line).toMatch(new RegExp(`^ ${i + 1} +1 +llm-judge +fail +0\\.1 +score 0\\.1 < threshold 0\\.7; off topic`));
  });
});
