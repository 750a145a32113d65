import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { CLI_COMPILED } from '../helpers/cli.js';
import { testDatabase } from '../helpers/db.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { dagRunAll, PAIR_YAML } from '../helpers/rerun-pair.js';
import { agentRegister } from '../../src/engine/ops/agents.js';

/** `dagent dag rerun --model/--set` and `dagent dag compare`, as users run them: the compiled CLI in a child process. */
const database = await testDatabase();
const { db } = database;
const env = { ...process.env, DATABASE_URL: database.url, USER: 'ana' };

/** `dagent …` in a child process; resolves with the exit code. */
function dagent(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...CLI_COMPILED, ...argv], { env, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** An output an agent wrote to take over a terminal: retitle the window, reverse the line, start a line of its own. */
const HOSTILE = 'polish \x1b]0;pwned\x07 report\u202e desrever\nerror: fake line';

await agentRegister(db, { id: 'w', type: 'test', capabilities: ['tool'], models: ['*'], maxConcurrent: 100 });
const first = await dagCreate(db, PAIR_YAML);
await dagRunAll(db, 'w', first, {
  output: (k, m) => (k === 'gather' ? { facts: [1, 2] } : k === 'polish' ? HOSTILE : `${k} report by ${m}`),
  spend: (k) => (k === 'gather' ? undefined : { costUsd: 0.5, tokensIn: 1000, tokensOut: 200 }),
});

describe('dagent dag rerun with a change, and dagent dag compare', () => {
  let rerun = '';

  it('re-runs the finished DAG as a new DAG: the LLM tasks and what follows them run, the rest is reused; status says so', async () => {
    const r = await dagent('dag', 'rerun', first, '--model', 'model-b', '--set', 'polish.input.tone=formal', '--note', 'cheaper?');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    rerun = /^(dag_\w+): /.exec(lines[0]!)![1]!;
    expect(lines.slice(0, 3)).toEqual([
      `${rerun}: rerun of ${first} (model model-b; set polish.input.tone): 2 task(s) re-run, 1 reused (cheaper?)`,
      'runs: draft, polish',
      'reused: gather',
    ]);
    const [row] = await rowsOf<{ created_by: string; rerun_of: string }>(db, sql`select created_by, rerun_of from dags where id = ${rerun}`);
    expect(row).toEqual({ created_by: 'cli:ana', rerun_of: first });

    const status = await dagent('status', rerun);
    expect(status.stdout).toContain(`rerun of ${first} (model model-b; set polish.input.tone): 2 task(s) re-run, 1 reused (cheaper?)`);
    expect(status.stdout).toMatch(/^ gather\s+completed\s+0\/3\s+\(reused\)\s/m);
    expect((await dagent('status', first)).stdout).toContain(`reruns: ${rerun} (running)`);

    const json = await dagent('dag', 'rerun', first, '--set', 'draft.prompt=Write it: short', '--json');
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ rerunOf: first, rerun: ['draft', 'polish'], reused: ['gather'], change: { set: [{ task: 'draft', field: 'prompt', value: 'Write it: short' }] } });
  });

  it('compares the two runs task by task, every agent-written character shown as text, and --json whole', async () => {
    await dagRunAll(db, 'w', rerun, {
      output: (k, m) => `${k} report by ${m}`,
      spend: (k) => (k === 'draft' ? { costUsd: null, tokensIn: 300, tokensOut: 100 } : { costUsd: 0.25, tokensIn: 500, tokensOut: 50 }),
    });
    const r = await dagent('dag', 'compare', first, rerun);
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toBe(`A ${first}  report  completed`);
    expect(lines[1]).toBe(`B ${rerun}  report  completed  rerun of ${first} (model model-b; set polish.input.tone): 2 task(s) re-run, 1 reused (cheaper?)`);
    const row = (key: string) => lines.find((l) => l.startsWith(` ${key} `))!.trim().split(/\s{2,}/);
    expect(row('draft')).toEqual(['draft', 'draft report by model-a', 'draft report by model-b', 'regex pass → regex pass', '$0.5000 → cost unknown', '1200 → 400', expect.stringMatching(/^\d+ ms → \d+ ms$/), '1 → 1']);
    expect(row('gather')).toEqual(['gather', '{ "facts": [ 1, 2 ] }', '(same)', '- → -', '$0.0000 → $0.0000', '0 → 0', expect.stringMatching(/^\d+ ms → -$/), '1 → reused']);
    // The hostile output reaches the terminal as text on its one line: no escape, no bidi override, no line of its own.
    expect(row('polish')[1]).toBe('polish \\x1b]0;pwned\\x07 report\\u202e desrever erro…');
    expect(r.stdout).not.toMatch(/[\x1b\x07\u202e]/);
    expect(lines.filter((l) => l.startsWith('error: fake'))).toEqual([]);
    expect(lines.slice(-4)).toEqual([
      expect.stringMatching(/^A: \$1\.0000, 2400 tokens, \d+ ms, 3 attempt\(s\), 3\/3 completed, 1\/1 verdicts passed$/),
      expect.stringMatching(/^B: \$0\.2500 \+ cost unknown for 1 task\(s\), 950 tokens, \d+ ms, 2 attempt\(s\), 3\/3 completed \(1 reused\), 1\/1 verdicts passed$/),
      '2 of 3 outputs differ',
      '',
    ]);

    const json = await dagent('dag', 'compare', first, rerun, '--json');
    const c = JSON.parse(json.stdout);
    const polish = c.tasks.find((t: { key: string }) => t.key === 'polish');
    // Whole, and the same text once parsed: JSON escapes the controls (\u001b), and dagent the bidi override.
    expect([polish.a.outputText, polish.a.outputTruncated, polish.b.costUsd, c.b.totals.costUnknownTasks]).toEqual([HOSTILE, false, 0.25, 1]);
    expect(json.stdout).not.toMatch(/[\x1b\x07\u202e]/);
  });

  it('refuses with documented exit codes: bad input 2, an unfinished DAG 1, an unknown DAG 4', async () => {
    const open = await dagCreate(db, PAIR_YAML);
    const cases: Array<[string[], number, RegExp]> = [
      [['dag', 'rerun', open, '--model', 'model-b'], 1, new RegExp(`^error: DAG ${open} is running: only a finished DAG`)],
      [['dag', 'rerun', first, '--set', 'draft.promt=x'], 2, /^error: set draft\.promt: unknown field promt \(did you mean "prompt"\?\)/],
      [['dag', 'rerun', first, '--set', 'constraints.max_cost_usd=lots'], 2, /^error: set constraints\.max_cost_usd: .*expected number/i],
      [['dag', 'rerun', first, '--set', 'prompt'], 2, /^error: --set prompt: expected PATH=VALUE/],
      [['dag', 'rerun', first, '--model', 'model b'], 2, /^error: model: must be a model name/],
      [['dag', 'rerun', first], 2, /either --from-failed .* or a change as a new DAG/],
      [['dag', 'rerun', first, '--from-failed', '--model', 'model-b'], 2, /not both nor neither/],
      [['dag', 'rerun', 'dag_doesnotexist00', '--model', 'model-b'], 4, /DAG dag_doesnotexist00 not found/],
      [['dag', 'compare', first, 'dag_doesnotexist00'], 4, /DAG dag_doesnotexist00 not found/],
    ];
    const before = (await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from dags`))[0]!.n;
    for (const [argv, code, message] of cases) {
      const r = await dagent(...argv);
      expect([r.code, r.stderr], argv.join(' ')).toEqual([code, expect.stringMatching(message)]);
    }
    expect((await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from dags`))[0]!.n).toBe(before);
  });
});
