import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { envKept } from '../helpers/env.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { dagCreate, databaseReset, leaseLapsedReaped, rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { answer, fault, llmServerStart } from '../helpers/llm-server/index.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';

// The llm agent as real processes: one SIGKILLed between two model calls of a tool loop. The next attempt replays
// the answered call from its step and pays only for the call that never answered.
const database = await testDatabase();
const { db } = database;
const agentProcess = agentProcesses(database.url);
const reaper = reaperCreate({ db });
const provider = await llmServerStart();

// The agent processes inherit this environment.
const ENV = {
  ANTHROPIC_API_KEY: 'sk-ant-test', DAGENT_LLM_ANTHROPIC_BASE_URL: provider.baseUrl, DAGENT_LLM_MODELS: 'anthropic/claude-test',
  DAGENT_LLM_PRICES: JSON.stringify({ 'anthropic/claude-test': { input: 3, output: 15 } }),
};
envKept(Object.keys(ENV));
Object.assign(process.env, ENV);

beforeEach(async () => {
  await databaseReset(db);
  provider.seen = [];
});
afterAll(async () => {
  await provider.close();
});

describe('a model call recorded before a crash', () => {
  it('an llm agent SIGKILLed while its second call is in flight: the next process replays the first and makes the second, each paid once', async () => {
    provider.script([
      answer.toolCall('log', { message: 'read the sources' }, { usage: { input: 400, output: 50 } }),
      fault.hang(),
      answer.text('The answer, after the log.', { usage: { input: 480, output: 60 } }),
    ]);
    const dagId = await dagCreate(db, `
name: crash
defaults: { max_attempts: 3, retry: { strategy: immediate } }
tasks:
  think: { type: llm, spec: { constraints: { capabilities: [llm] }, models: [anthropic/claude-test], prompt: Think it through., input: { tools: [log] } } }
`);
    const first = await agentProcess('agents/llm.ts', 'llm-a');
    await eventually('the second call is in flight', async () => provider.seen.length === 2, 30_000);
    first.child.kill('SIGKILL');
    expect(await first.exited).toBe(null);
    await leaseLapsedReaped(db, reaper, 'llm-a');

    await agentProcess('agents/llm.ts', 'llm-b');
    const task = async () => (await rowsOf<{ id: string; status: string; output: { text: string } | null }>(db, sql`select id, status, output from tasks where dag_id = ${dagId}`))[0]!;
    await eventually('completed', async () => (await task()).status === 'completed', 30_000);
    expect((await task()).output!.text).toBe('The answer, after the log.');
    // Three requests: the first call once (replayed by attempt 2), the second twice (lost with the process, then answered).
    expect(provider.seen).toHaveLength(3);
    expect(JSON.stringify(provider.seen[2]!.body)).toBe(JSON.stringify(provider.seen[1]!.body));
    expect(JSON.stringify(provider.seen[0]!.body)).not.toBe(JSON.stringify(provider.seen[1]!.body));
    const spent = await rowsOf<{ tokens_in: number; tokens_out: number; usd: number }>(db, sql`
      select sum(tokens_in)::int as tokens_in, sum(tokens_out)::int as tokens_out, sum(cost_usd)::float8 as usd from usage_reports where dag_id = ${dagId}`);
    expect(spent).toEqual([{ tokens_in: 880, tokens_out: 110, usd: expect.closeTo((880 * 3 + 110 * 15) / 1e6, 9) }]);
    const replays = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from task_step_replays r join tasks t on t.id = r.task_id where t.dag_id = ${dagId}`);
    expect(replays).toEqual([{ n: 1 }]);
  }, 90_000);
});
