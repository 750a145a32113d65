import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { leash } from '../helpers/child-leash.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { CLI_COMPILED } from '../helpers/cli.js';

const database = await testDatabase();
const { db } = database;

/** The keys of one JSON log line, in order, duplicates kept (JSON.parse would hide them). */
const keysOf = (line: string) => [...line.matchAll(/[{,]"([A-Za-z_]+)":/g)].map((m) => m[1]!);

/** `dagent agent run` of a fixture at the default log level, its output gathered as it comes. */
async function agentRun(fixture: string, id: string) {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: database.url };
  delete env.DAGENT_LOG_LEVEL;
  const child = leash(spawn(process.execPath, [...CLI_COMPILED, 'agent', 'run', fixture, '--id', id, '--no-maintenance', '--poll-ms', '200'], { env, stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  child.stdout.on('data', (b) => (out += b));
  child.stderr.on('data', (b) => (out += b));
  await eventually('running', async () => out.includes('running with capabilities'), 30_000);
  return { output: () => out, stop: () => child.kill('SIGTERM') };
}

describe('logs a person can read', () => {
  it('dagent agent run shows an agent\'s ctx.log.info by default, with the task\'s ids as fields and no key twice', async () => {
    const agent = await agentRun('test/fixtures/agents/chatty.ts', 'chatty-1');
    const out = () => agent.output();
    try {
      const dagId = await dagCreate(db, 'name: chatty\ntasks:\n  a: { type: t, spec: { constraints: { capabilities: [chatty] } } }\n');
      await eventually('completed', async () => (await rowsOf<{ status: string }>(db, sql`select status from tasks where dag_id = ${dagId}`))[0]!.status === 'completed');
      await eventually('the handler\'s line logged', async () => out().includes('"msg":"working on a"'));
      const line = out().split('\n').find((l) => l.includes('"msg":"working on a"'))!;
      expect(JSON.parse(line)).toMatchObject({ level: 30, agentId: 'chatty-1', dagId, words: 3, taskId: expect.stringMatching(/^tsk_/) });
      // No line the process wrote repeats a key (a child logger's field given again at the call).
      for (const l of out().split('\n').filter((x) => x.startsWith('{'))) {
        const keys = keysOf(l);
        expect(keys.filter((k, i) => keys.indexOf(k) !== i), l).toEqual([]);
      }
    } finally {
      agent.stop();
    }
  });

  it('a failed attempt is logged once, with its message and its outcome, and no key twice', async () => {
    const agent = await agentRun('test/fixtures/agents/flaky.ts', 'flaky-1');
    const out = () => agent.output();
    try {
      const dagId = await dagCreate(db, 'name: flaky-log\ntasks:\n  a: { type: t, spec: { constraints: { capabilities: [flaky] } } }\n');
      await eventually('the failure recorded', async () => (await rowsOf<{ status: string }>(db, sql`select status from tasks where dag_id = ${dagId}`))[0]!.status === 'retrying');
      await eventually('the failure logged', async () => out().includes('first attempt of a fails'));
      await new Promise((r) => setTimeout(r, 300)); // a second line, if any, would be written by now
      const lines = out().split('\n').filter((l) => l.includes(dagId) && /fail/i.test(l));
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, msg: 'task failed', agentId: 'flaky-1', dagId, errorClass: 'flaky', message: 'first attempt of a fails', status: 'retrying' });
      expect(keysOf(lines[0]!).filter((k, i, all) => all.indexOf(k) !== i)).toEqual([]);
    } finally {
      agent.stop();
    }
  });
});
