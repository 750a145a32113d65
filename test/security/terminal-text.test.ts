import { execFile, spawn } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { CLI_COMPILED } from '../helpers/cli.js';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';

// Trust boundary, third pass, item 5: text an agent wrote (its log lines, its failure message, the message of
// a provider's rate limit it reported, its output, its type) is printed by the CLI on an operator's terminal.
// A terminal acts on control characters in it (clear the screen, set the window title, write the clipboard with
// OSC 52, move the cursor back over what was printed), and a newline in one log message would print as an entry
// of its own. Each command, run as a real process, must show all of them as visible escapes.
const database = await testDatabase();
const http = await testHttp(database);
const env = { ...process.env, DATABASE_URL: database.url };

/** Each sequence an agent might write, and how the operator must see it. */
const SEQUENCES = [
  { name: 'CSI clear screen', raw: '\x1b[2J', shown: '\\x1b[2J' },
  { name: 'OSC window title', raw: '\x1b]0;pwned\x07', shown: '\\x1b]0;pwned\\x07' },
  { name: 'OSC 52 clipboard write', raw: '\x1b]52;c;cm0gLXJmIH4K\x07', shown: '\\x1b]52;c;cm0gLXJmIH4K\\x07' },
  { name: 'BEL', raw: 'ding\x07', shown: 'ding\\x07' },
  { name: 'CR over the line', raw: 'real\rfake', shown: 'real\\rfake' },
  { name: 'BS over the line', raw: 'rm\x08\x08ok', shown: 'rm\\x08\\x08ok' },
  { name: 'C1 CSI', raw: '\u009b2J', shown: '\\u009b2J' },
  { name: 'DEL', raw: 'del\x7f', shown: 'del\\x7f' },
  { name: 'bidi override', raw: '\u202eevil\u202c', shown: '\\u202eevil\\u202c' },
  { name: 'bidi isolate', raw: '\u2066iso\u2069', shown: '\\u2066iso\\u2069' },
  // Last: a command that shows only a message's first line (watch) still shows all the others.
  { name: 'newline forging a log entry', raw: '\n12:00:00.000 ERROR forged entry', shown: '\\n12:00:00.000 ERROR forged entry' },
] as const;
const HOSTILE = SEQUENCES.map((s) => s.raw).join(' ');
const FORGED = SEQUENCES.at(-1)!;
/** As JSON.stringify writes a C0 control inside a string (task show prints outputs and events as JSON). */
const TITLE_IN_JSON = '\\u001b]0;pwned\\u0007';

/** Anything a terminal would act on; a command's own line breaks are the only control it may print. */
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
/** The forged entry printed as a line of its own (at the start of a line, or of a table cell's line). */
const FORGED_AS_LINE = /^\s*12:00:00\.000 ERROR forged entry/m;

/** `dagent …` from the sources in a child process: its exit code and output as the terminal would get them. */
function dagent(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...CLI_COMPILED, ...argv], { env, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

const ids = { dag: '', work: '', answer: '', limited: '', deadLetter: '' };
const AGENT = 'hostile-agent';
const AGENT_TYPE = `worker ${SEQUENCES[1].raw}${SEQUENCES[6].raw}${SEQUENCES[8].raw}`;

beforeAll(async () => {
  const call = async (path: string, body: unknown, token?: string) => {
    const r = await http.call('POST', path, { token, body });
    expect(r.status, `${path}: ${JSON.stringify(r.body)}`).toBeLessThan(300);
    return r.body;
  };
  // Submitted data too: a DAG title is printed by `status`.
  ids.dag = (await call('/api/dags', { dag: { name: 'hostile', title: `audit ${HOSTILE}`, tasks: { work: { type: 'w', max_attempts: 1 }, answer: { type: 'w' } } } })).results[0].dagId;
  const limitedDag = (await call('/api/dags', { dag: { name: 'limited', tasks: { call: { type: 'w', spec: { models: ['acme-large'] } } } } })).results[0].dagId;
  const token = await http.agentToken(AGENT, [], [], ['acme-large']);
  await call('/api/agents', { id: AGENT, type: AGENT_TYPE, capabilities: [], models: ['acme-large'], max_concurrent: 4 }, token);

  const claimed = (await call(`/api/agents/${AGENT}/claim`, { limit: 2, start: true, dag_id: ids.dag }, token)).tasks as Array<{ id: string; key: string; fence: number }>;
  const work = claimed.find((t) => t.key === 'work')!;
  const answer = claimed.find((t) => t.key === 'answer')!;
  [ids.work, ids.answer] = [work.id, answer.id];
  await call(`/api/tasks/${work.id}/logs`, {
    fence: work.fence,
    lines: [{ level: 'error', message: HOSTILE }, { message: 'with fields', fields: { note: HOSTILE } }, { level: 'warn', message: 'giving up' }],
  }, token);
  await call(`/api/tasks/${answer.id}/complete`, { fence: answer.fence, output: { text: HOSTILE } }, token);
  ids.deadLetter = (await call(`/api/tasks/${work.id}/fail`, { fence: work.fence, error_class: 'crash', message: HOSTILE, retryable: false }, token)).deadLetterId;

  const [limited] = (await call(`/api/agents/${AGENT}/claim`, { start: true, dag_id: limitedDag }, token)).tasks as Array<{ id: string; fence: number }>;
  ids.limited = limited!.id;
  const r = await call(`/api/tasks/${limited!.id}/fail`, { fence: limited!.fence, error_class: 'rate_limit', message: HOSTILE, model: 'acme-large', retry_after_sec: 600 }, token);
  expect(r).toMatchObject({ rateLimited: true });
}, 60_000);

const everyEscape = SEQUENCES.map((s) => s.shown);
const firstLineEscapes = SEQUENCES.slice(0, -1).map((s) => s.shown);

describe('agent text printed by the CLI', () => {
  it.each([
    { what: 'logs', argv: () => ['logs', ids.work], shows: everyEscape },
    { what: 'logs --follow (of an ended attempt)', argv: () => ['logs', ids.work, '--follow'], shows: everyEscape },
    { what: 'task show: the failure', argv: () => ['task', 'show', ids.work], shows: everyEscape },
    { what: 'task show: the output (as JSON)', argv: () => ['task', 'show', ids.answer], shows: [TITLE_IN_JSON, '\\u009b2J', 'del\\x7f', '\\u202eevil\\u202c', '\\u2066iso\\u2069'] },
    { what: 'task show: the rate limit', argv: () => ['task', 'show', ids.limited], shows: everyEscape },
    { what: 'dlq show: the history and the log', argv: () => ['dlq', 'show', ids.deadLetter], shows: everyEscape },
    { what: 'stats: the rate-limit reason and the agent type', argv: () => ['stats'], shows: [...everyEscape, `worker ${SEQUENCES[1].shown}${SEQUENCES[6].shown}${SEQUENCES[8].shown}`] },
    { what: 'limits list: the rate-limit reason', argv: () => ['limits', 'list'], shows: everyEscape },
    { what: 'status: the DAG title', argv: () => ['status', ids.dag], shows: everyEscape },
    { what: 'watch: the failure in a transition line', argv: () => ['watch', ids.dag], shows: firstLineEscapes, code: 1 },
  ])('$what: every control shown escaped, no forged line', async ({ argv, shows, code }) => {
    const r = await dagent(...argv());
    expect(r.code, r.stderr).toBe(code ?? 0);
    for (const [stream, text] of [['stdout', r.stdout], ['stderr', r.stderr]] as const) {
      const at = RAW_CONTROL.exec(text);
      expect(at && `${stream} holds U+${at[0].charCodeAt(0).toString(16).padStart(4, '0')} at ${at.index}: ${JSON.stringify(text.slice(Math.max(0, at.index - 40), at.index + 40))}`).toBeNull();
    }
    for (const s of shows) expect(r.stdout).toContain(s);
    expect(r.stdout).not.toMatch(FORGED_AS_LINE);
  }, 60_000);

  it('logs: the message with a newline is one entry, the escaped newline inside it', async () => {
    const r = await dagent('logs', ids.work);
    const entries = r.stdout.split('\n').filter((l) => /^\d\d:\d\d:\d\d\.\d{3} /.test(l));
    expect(entries).toHaveLength(3);
    expect(entries[0]).toMatch(/^\S+ ERROR /);
    expect(entries[0]).toContain(FORGED.shown);
    expect(entries.map((l) => l.split(' ')[1])).toEqual(['ERROR', 'INFO', 'WARN']);
  }, 60_000);
});

// JSON.stringify escapes the C0 controls but writes DEL, the C1 controls and the bidi characters as they are;
// `--json` output read on a terminal must be as safe, and parse to exactly what the agent sent.
describe('agent text printed by the CLI with --json', () => {
  it.each([
    { what: 'logs --json', argv: () => ['logs', ids.work, '--json'], sent: (j: any) => [j.attempt.entries[0].message, j.attempt.entries[1].fields.note], expected: [HOSTILE, HOSTILE] },
    { what: 'logs --follow --json (a JSON line per log line)', argv: () => ['logs', ids.work, '--follow', '--json'], lines: true, sent: (j: any) => [j[0].message, j[1].fields.note], expected: [HOSTILE, HOSTILE] },
    { what: 'task show --json', argv: () => ['task', 'show', ids.answer, '--json'], sent: (j: any) => [j.task.output.text], expected: [HOSTILE] },
    { what: 'stats --json', argv: () => ['stats', '--json'], sent: (j: any) => [j.pausedModels[0].reason, j.agents[0].type], expected: [HOSTILE, AGENT_TYPE] },
  ])('$what: no raw control, and the same text once parsed', async ({ argv, lines, sent, expected }) => {
    const r = await dagent(...argv());
    expect(r.code, r.stderr).toBe(0);
    const at = RAW_CONTROL.exec(r.stdout);
    expect(at && `U+${at[0].charCodeAt(0).toString(16).padStart(4, '0')} at ${at.index}`).toBeNull();
    const parsed = lines ? r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l)) : JSON.parse(r.stdout);
    expect(sent(parsed)).toEqual(expected);
  }, 60_000);
});

// The processes' own log lines: `dagent up` and `agent run` log an agent's failure message, pretty on a terminal.
describe('agent text in a process\'s pretty log lines', () => {
  it('agent run: the failure message is shown escaped, on its own line', async () => {
    const dag = await http.call('POST', '/api/dags', { body: { dag: { name: 'pretty-log', tasks: { fail: { type: 'w', max_attempts: 1, spec: { input: { message: HOSTILE }, constraints: { capabilities: ['hostile-fail'] } } } } } } });
    expect(dag.status, JSON.stringify(dag.body)).toBe(201);
    const child = spawn(process.execPath, [...CLI_COMPILED, 'agent', 'run', 'test/fixtures/agents/hostile-fail.mjs', '--id', 'pretty-failer', '--poll-ms', '200', '--no-maintenance'], {
      env: { ...env, DAGENT_LOG_FORMAT: 'pretty', DAGENT_LOG_LEVEL: 'warn', NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (b) => (stderr += b));
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no failure logged: ${stderr}`)), 30_000);
        child.stderr.on('data', () => { if (stderr.includes('forged entry')) { clearTimeout(timer); resolve(); } });
      });
      await new Promise((r) => setTimeout(r, 200));
    } finally {
      child.kill('SIGKILL');
    }
    const at = RAW_CONTROL.exec(stderr);
    expect(at && `stderr holds U+${at[0].charCodeAt(0).toString(16).padStart(4, '0')} at ${at.index}: ${JSON.stringify(stderr.slice(Math.max(0, at.index - 40), at.index + 40))}`).toBeNull();
    for (const s of everyEscape) expect(stderr).toContain(s);
    expect(stderr).not.toMatch(FORGED_AS_LINE);
  }, 60_000);
});
