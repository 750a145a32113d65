import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import type { Db } from '../../../src/db/handle.js';
import { dagFileLoad, dagSourceLoad } from '../../../src/dag/load.js';
import { dagSubmit } from '../../../src/engine/dag/submit.js';
import { dagBudgetSet } from '../../../src/engine/dag/dag-status.js';
import { taskSpawn } from '../../../src/engine/dag/spawn.js';
import { agentDeregister, agentRegister } from '../../../src/engine/ops/agents.js';
import { scheduleFireDue, scheduleRegister } from '../../../src/engine/ops/cron.js';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { taskFail } from '../../../src/engine/attempt/fail.js';
import { taskStart } from '../../../src/engine/attempt/lease.js';
import { stepRecord, stepReplay } from '../../../src/engine/attempt/steps.js';
import { priorityRefresherCreate } from '../../../src/maintenance/priority-refresher.js';
import { attemptLogAppend } from '../../../src/engine/read/attempt-logs.js';
import { rowsOf } from '../../helpers/factories.js';
import { dagRunAll } from '../../helpers/rerun-pair.js';
import { dagRerunChanged } from '../../../src/engine/dag/rerun-changed.js';

/**
 * The objects the docs' examples name, made in a scratch database as each example implies: a DAG whose task failed
 * three times on two agents, a completed research report, a release train with a budget, tasks nobody can take, a
 * judge's rejections, spend, old DAGs for prune, a schedule that fired. Each returns the ids the docs' placeholders
 * stand for (test/docs/shell-blocks.test.ts maps them).
 */

const agent = (db: Db, id: string, capabilities: string[] = [], more: { type?: string; budgetUsd?: number } = {}) =>
  agentRegister(db, { id, type: more.type ?? 'test', capabilities, models: ['*'], maxConcurrent: 100, budgetUsd: more.budgetUsd });

async function submit(db: Db, yaml: string, createdBy = 'script'): Promise<string> {
  const [r] = await dagSubmit(db, [await dagSourceLoad(yaml, 'inline.yaml')], { createdBy });
  return r!.dagId;
}

/** Claim the most urgent task of `dagId` as `agentId`, which must be `key` when given. */
async function claim(db: Db, agentId: string, dagId: string, key?: string) {
  const [t] = await taskClaim(db, agentId, { dagId });
  if (!t || (key && t.key !== key)) throw new Error(`fixture: ${agentId} claimed ${t?.key ?? 'nothing'} of ${dagId}, wanted ${key ?? 'a task'}`);
  return t;
}

/** Claim and complete every task of `dagId` as `agentId`, each reporting `costUsd`. */
async function drainDag(db: Db, agentId: string, dagId: string, costUsd = 0): Promise<void> {
  for (;;) {
    const held = await taskClaim(db, agentId, { dagId, limit: 10 });
    if (held.length === 0) return;
    for (const t of held) await taskComplete(db, { taskId: t.id, fence: t.fence, costUsd, output: t.type === 'synthesize' ? `# ${t.key}\n` : { key: t.key } });
  }
}

/**
 * docs/cli.md's "flaky" DAG: `fetch` crashed on agent-a, agent-b, agent-a and is a dead-lettered poison pill; attempts 1 and 2
 * logged; attempt 1 recorded two durable steps, which attempt 2 replayed before it recorded one of its own (`task steps`).
 */
export async function flakyDag(db: Db) {
  const dagId = await submit(db, `name: flaky
tasks:
  fetch: { type: shell, max_attempts: 3, retry: { strategy: immediate }, spec: { input: { command: "curl https://example.com" } } }
  summarize: { type: research, depends_on: [fetch] }
`);
  await agent(db, 'agent-a');
  await agent(db, 'agent-b');
  const logs = [
    [{ level: 'info', message: 'cloning', fields: { repo: 'api' } }],
    [{ level: 'info', message: 'cloning', fields: { repo: 'api' } }, { level: 'warn', message: 'slow provider', fields: { ms: 2210 } }, { level: 'error', message: 'tests failed: 3' }],
    [],
  ];
  let outcome;
  for (const [i, who] of ['agent-a', 'agent-b', 'agent-a'].entries()) {
    const t = await claim(db, who, dagId, 'fetch');
    const ref = { taskId: t.id, fence: t.fence };
    if (logs[i]!.length) await attemptLogAppend(db, ref, logs[i]!);
    if (i === 0) {
      await stepRecord(db, { ...ref, name: 'search', result: { hits: ['a'] }, durationMs: 1200, tokensIn: 2400, tokensOut: 310 });
      await stepRecord(db, { ...ref, name: 'outline', result: { sections: 3 }, durationMs: 3310, tokensIn: 3100, tokensOut: 900 });
    }
    if (i === 1) {
      for (const name of ['search', 'outline']) await stepReplay(db, ref, name);
      await stepRecord(db, { ...ref, name: 'draft', result: 'text', scope: 'attempt', durationMs: 9021, tokensIn: 5200, tokensOut: 2400 });
    }
    outcome = await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'crash', message: `exit code 137 on ${who}` });
  }
  if (outcome?.status !== 'dead_lettered') throw new Error(`fixture: fetch is ${outcome?.status}, not dead-lettered`);
  const [fetch] = await rowsOf<{ id: string }>(db, sql`select id from tasks where dag_id = ${dagId} and key = 'fetch'`);
  return { dagId, taskId: fetch!.id, deadLetterId: outcome.deadLetterId };
}

/** research-report.yaml as the demo ran it: every task completed by the agent demo-1, now offline. */
export async function completedReport(db: Db) {
  const [r] = await dagSubmit(db, [await dagFileLoad('dags/examples/research-report.yaml')], { createdBy: 'demo' });
  await agent(db, 'demo-1', ['llm', 'markdown'], { type: 'demo' });
  await drainDag(db, 'demo-1', r!.dagId, 0.01);
  await agentDeregister(db, 'demo-1');
  return r!.dagId;
}

/** release-train.yaml and code-change.yaml (ticket ENG-42), as docs/cli.md submits them; the release train's budget $1. */
export async function releaseTrain(db: Db, budgetUsd?: number) {
  const [train] = await dagSubmit(db, [
    await dagFileLoad('dags/examples/release-train.yaml'), await dagFileLoad('dags/examples/code-change.yaml', { params: { ticket: 'ENG-42' } }),
  ], { createdBy: 'cli' });
  if (budgetUsd !== undefined) await dagBudgetSet(db, train!.dagId, budgetUsd);
  return train!.dagId;
}

/** docs/cli.md's `tasks --unclaimable`: a task no agent has the capability for, one no capable agent can afford, one past its DAG's budget. */
export async function unclaimable(db: Db): Promise<void> {
  await agent(db, 'thrifty', ['paid'], { budgetUsd: 1 });
  await agent(db, 'bulk-1', ['bulk']);
  await submit(db, `name: gpu-jobs
tasks:
  gpu: { type: t, spec: { constraints: { capabilities: [gpu] } } }
  pricey: { type: t, spec: { constraints: { capabilities: [paid], max_cost_usd: 5 } } }
`);
  await submit(db, 'name: big-jobs\nbudget_usd: 1\ntasks:\n  big: { type: t, spec: { constraints: { capabilities: [bulk], max_cost_usd: 2 } } }\n');
}

/** docs/cli.md's `tasks --status ready`: a ready changelog (priority 90) whose deadline has passed, flagged by the priority refresher. */
export async function lateChangelog(db: Db): Promise<void> {
  await submit(db, 'name: late\ntasks:\n  changelog: { type: research, priority: 90, deadline: "2020-01-01T00:00:00Z" }\n');
  await priorityRefresherCreate({ db }).runOnce();
}

/** docs/cli.md's second `dlq show`: a draft an llm-judge step rejected three times (score 0.1 < 0.7, "off topic"), on writer-a and writer-b. */
export async function judgeRejected(db: Db): Promise<string> {
  await agent(db, 'judge-1', ['validate:judge']);
  await agent(db, 'writer-a', ['write']);
  await agent(db, 'writer-b', ['write']);
  const dagId = await submit(db, `name: essay
tasks:
  draft:
    type: llm
    max_attempts: 3
    retry: { strategy: immediate }
    spec: { prompt: "Summarize the release", constraints: { capabilities: [write] } }
    output:
      validation: { kind: llm-judge, rubric: "On topic?", threshold: 0.7 }
`);
  for (const who of ['writer-a', 'writer-b', 'writer-a']) {
    const t = await claim(db, who, dagId, 'draft');
    await taskComplete(db, { taskId: t.id, fence: t.fence, output: { text: 'about something else' } });
    const v = await claim(db, 'judge-1', dagId);
    await taskComplete(db, { taskId: v.id, fence: v.fence, output: { pass: false, score: 0.1, reasons: ['off topic'] } });
  }
  const [entry] = await rowsOf<{ id: string }>(db, sql`select id from dead_letters where dag_id = ${dagId}`);
  if (!entry) throw new Error('fixture: the judged draft was not dead-lettered');
  return entry.id;
}

/** docs/priority.md's `dagent costs`: agents poor ($1) and rich ($50) spent on the DAG "stuck", which runs on. */
export async function spend(db: Db): Promise<void> {
  await agent(db, 'poor', ['spend'], { budgetUsd: 1 });
  await agent(db, 'rich', ['spend'], { budgetUsd: 50 });
  const dagId = await submit(db, `name: stuck
tasks:
  one: { type: t, priority: 10, spec: { constraints: { capabilities: [spend] } } }
  two: { type: t, priority: 20, spec: { constraints: { capabilities: [spend] } } }
  three: { type: t, depends_on: [one, two], spec: { constraints: { capabilities: [spend] } } }
`);
  for (const [who, key, costUsd] of [['poor', 'one', 0.25], ['rich', 'two', 49]] as const) {
    const t = await claim(db, who, dagId, key);
    await taskComplete(db, { taskId: t.id, fence: t.fence, costUsd, output: {} });
  }
}

/** docs/cli.md's `prune --older-than 30d`: two DAGs that completed 40 days ago, and one blocked since then on an open dead letter. */
export async function oldDags(db: Db): Promise<void> {
  await agent(db, 'old-agent', ['old']);
  const done: string[] = [];
  for (const name of ['old-done', 'old-done-too']) {
    done.push(await submit(db, `name: ${name}\ntasks:\n  a: { type: t, spec: { constraints: { capabilities: [old] } } }\n`));
    await drainDag(db, 'old-agent', done.at(-1)!);
  }
  const stuck = await submit(db, 'name: old-stuck\ntasks:\n  a: { type: t, max_attempts: 1, spec: { constraints: { capabilities: [old] } } }\n');
  const t = await claim(db, 'old-agent', stuck);
  await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'crash', message: 'gone' });
  await db.execute(sql`update dags set created_at = created_at - interval '40 days', completed_at = completed_at - interval '40 days' where id in (${done[0]}, ${done[1]}, ${stuck})`);
  await db.execute(sql`update dead_letters set created_at = created_at - interval '40 days' where dag_id = ${stuck}`);
}

/** docs/schedules.md's `cron list`: its dependency-audit schedule, registered three weeks ago; the latest missed fire ran and completed. */
export async function firedSchedule(db: Db, yaml: string): Promise<void> {
  const spec = await dagSourceLoad(yaml, 'dependency-audit.yaml');
  const weeksAgo = async () => new Date(Date.now() - 22 * 86_400_000);
  await scheduleRegister(db, spec, yaml, weeksAgo);
  const [report] = await scheduleFireDue(db);
  await agent(db, 'auditor', []);
  await drainDag(db, 'auditor', report!.fired[0]!.dagId);
}

/**
 * docs/cli.md's `watch`: a repository audit whose `survey` runs on repo-audit-1. `drive` then moves it on as the
 * agents would, each step once the watch printed the one before: survey spawns three folders and waits, shell-1
 * completes them, survey and report complete.
 */
export async function auditDag(db: Db) {
  await agent(db, 'repo-audit-1', ['repo-audit']);
  await agent(db, 'shell-1', ['shell']);
  const dagId = await submit(db, `name: repo-audit
spawn: { free_form: false, templates: { folder-audit: { type: shell, spec: { constraints: { capabilities: [shell] } } } } }
tasks:
  survey: { type: repo-audit, spec: { constraints: { capabilities: [repo-audit] } } }
  report: { type: synthesize, depends_on: [survey], spec: { constraints: { capabilities: [repo-audit] } } }
`, 'cli');
  const survey = await claim(db, 'repo-audit-1', dagId, 'survey');
  await taskStart(db, { taskId: survey.id, fence: survey.fence });
  const drive = async (printed: (pattern: RegExp) => Promise<unknown>) => {
    await printed(/▶ survey\s+running/);
    const folders = ['dir-src', 'dir-test', 'dir-docs'].map((key) => ({ key, template: 'folder-audit' }));
    await taskSpawn(db, { taskId: survey.id, fence: survey.fence }, folders, { wait: true });
    await printed(/⏸ survey\s+pending \(waiting for subtasks\)/);
    await drainDag(db, 'shell-1', dagId);
    await printed(/✔ survey\/dir-src\s+completed/);
    await drainDag(db, 'repo-audit-1', dagId);
  };
  return { dagId, drive };
}

/** What each task of the dependency audit answers and costs, in the first run and in its rerun on gpt-4o-mini. */
const AUDIT_RUNS: Array<Record<string, { output: unknown; spend?: { costUsd: number | null; tokensIn: number; tokensOut: number } }>> = [{
  inventory: { output: { packages: 212 } },
  outdated: { output: { outdated: 3 } },
  licenses: { output: '2 packages under GPL-3.0: left-pad, fast-glob-gpl', spend: { costUsd: 0.009, tokensIn: 1400, tokensOut: 120 } },
  advisories: { output: '1 advisory: minimist < 1.2.6 (prototype pollution, GHSA-xvch-5gv4-984h)', spend: { costUsd: 0.012, tokensIn: 1600, tokensOut: 240 } },
  report: { output: '# Dependency audit\n\n212 packages, 3 outdated, 2 copyleft licenses, 1 advisory.' },
}, {
  licenses: { output: '2 packages under GPL-3.0: left-pad, fast-glob-gpl', spend: { costUsd: 0.001, tokensIn: 1400, tokensOut: 90 } },
  advisories: { output: '2 advisories: minimist < 1.2.6, semver < 7.5.2 (ReDoS)', spend: { costUsd: null, tokensIn: 1300, tokensOut: 160 } },
  report: { output: '# Dependency audit\n\n212 packages, 3 outdated, 2 copyleft licenses, 2 advisories.' },
}];

/**
 * docs/cli.md's `dag rerun` and `dag compare`: dependency-audit.yaml run by audit-1, then re-run on gpt-4o-mini (the
 * licenses and advisories checks and the report run again; the inventory and outdated are reused), which audit-1
 * runs too; its advisories check reports a cost it has no price for.
 */
export async function auditRerun(db: Db) {
  await agent(db, 'audit-1', ['shell', 'llm', 'markdown']);
  const [r] = await dagSubmit(db, [await dagFileLoad('dags/examples/dependency-audit.yaml')], { createdBy: 'cli' });
  // Its report's not_before (1s) would hold it back: due now, it is READY once the checks are done.
  await db.execute(sql`update tasks set run_at = now() where dag_id = ${r!.dagId} and key = 'report'`);
  const plan = (run: number) => ({ output: (k: string) => AUDIT_RUNS[run]![k]!.output, spend: (k: string) => AUDIT_RUNS[run]![k]!.spend });
  await dagRunAll(db, 'audit-1', r!.dagId, plan(0));
  const rerun = await dagRerunChanged(db, r!.dagId, { model: 'gpt-4o-mini' }, { by: 'cli:ana', note: 'is mini good enough?' });
  await dagRunAll(db, 'audit-1', rerun.dagId, plan(1));
  return { first: r!.dagId, rerun: rerun.dagId };
}

/** The `yaml` block just before `marker` in a doc: the file an example command reads, as the doc shows it. */
export function yamlBefore(doc: string, marker: string): string {
  const text = readFileSync(doc, 'utf8');
  const blocks = [...text.slice(0, text.indexOf(marker)).matchAll(/```yaml\n([\s\S]*?)```/g)];
  return blocks.at(-1)![1]!;
}

/** Write `text` to `name` in `dir`; its path. */
export function fileWrite(dir: string, name: string, text: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

/** docs/cli.md's second `submit nightly.yaml`: the file's DAG, with its idempotency key, was submitted before. */
export async function nightlySubmitted(db: Db, file: string): Promise<void> {
  await dagSubmit(db, [await dagFileLoad(file)], { createdBy: 'cli' });
}
