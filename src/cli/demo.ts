import type { Command } from 'commander';
import path from 'node:path';
import { configFromEnv } from '../config/index.js';
import type { Database } from '../db/handle.js';
import { dagFileLoad } from '../dag/load.js';
import { DagNotCompletedError } from '../errors.js';
import { packageRoot, RUNNING_FROM_SOURCES } from '../package-root.js';
import type { DagSpec } from '../dag/spec.js';
import { attemptCountsForDag } from '../engine/read/inspect.js';
import { dagSubmit } from '../engine/dag/submit.js';
import { agentModuleLoad } from '../runtime/agent-load.js';
import { nodeStart } from '../node.js';
import { withDatabase, type CommandContext } from './context.js';
import { Output, usd } from './output.js';
import { DagProgress, dagProgressFollow, dagWatch, type DagSnapshot } from './progress.js';
import { paramCollect } from './submit.js';

const DEFAULT_DAG = path.join(packageRoot(), 'dags/repo-audit.yaml');
/** The example agents the main job runs in-process: their sources, or their compiled JavaScript when dagent runs compiled. */
const DEMO_AGENTS = ['repo-audit', 'shell', 'synthesize', 'validate-test']
  .map((name) => path.join(packageRoot(), RUNNING_FROM_SOURCES ? `agents/${name}.ts` : `dist/agents/${name}.js`));
const POLL_MS = 100;

/**
 * The main job (`npm start`): migrate, start the maintenance loops and the
 * example agents, submit the repository audit, show each task transition live,
 * and end with a summary and where the report is.
 */
export function demoCommand(program: Command, ctx: CommandContext): void {
  program
    .command('demo')
    .description('audit this repository with the example agents, live: the main job behind npm start')
    .argument('[file]', 'DAG file', DEFAULT_DAG)
    .option('-p, --param <name=value>', 'set a DAG param (repeatable)', paramCollect, {})
    .option('--json', 'no progress lines; print the summary as JSON')
    .action(async (file: string, opts: { param: Record<string, string>; json?: boolean }) => {
      const spec = await dagFileLoad(file, { params: opts.param });
      const defs = await Promise.all(DEMO_AGENTS.map((a) => agentModuleLoad(a)));
      await withDatabase(ctx, (d) => demoRun(d, ctx, spec, defs, !!opts.json));
    });
}

async function demoRun(d: Database, ctx: CommandContext, spec: DagSpec, defs: Awaited<ReturnType<typeof agentModuleLoad>>[], json: boolean): Promise<void> {
  const output = new Output(ctx.io, json);
  const out = (s: string) => {
    if (!json) output.line(s);
  };
  const started = Date.now();
  // As `dagent up` runs them: the loops with this environment's settings (retention, backpressure), and each agent
  // under its stable id (`<name>-<instance>`), so the runs of `npm start` share their agents' history and spend.
  const cfg = configFromEnv(ctx.io.env);
  let final: DagSnapshot;
  const node = await nodeStart({
    database: d, log: ctx.log, agents: defs.map((def) => ({ def })), instance: cfg.agentInstance, maxQueued: cfg.maxQueued, retentionSec: cfg.retentionSec, retentionStreamsSec: cfg.retentionStreamsSec, loopLeaseSec: cfg.loopLeaseSec,
  });
  try {
    out(`agents: ${node.agents.map((r) => `${r.id} [${r.def.capabilities.join(', ')}]`).join(', ')}`);
    const [submitted] = await dagSubmit(d.db, [spec], { createdBy: 'demo', log: ctx.log, maxQueued: cfg.maxQueued });
    const dagId = submitted!.dagId;
    out(`submitted ${spec.name} as ${dagId} from ${path.relative(process.cwd(), spec.sourceFile ?? '') || spec.sourceFile}`);
    final = json
      ? await dagProgressFollow(new DagProgress(d.db, dagId, { transition: () => {}, status: () => {} }), POLL_MS)
      : await dagWatch(d.db, dagId, ctx.io, POLL_MS);
  } finally {
    await node.stop(5_000);
  }
  const dagId = final.dag.id;
  const counts = await attemptCountsForDag(d.db, dagId);
  const report = final.tasks.map((t) => (t.output as { path?: unknown } | null)?.path).find((p): p is string => typeof p === 'string');
  const summary = {
    dagId,
    status: final.dag.status,
    completed: final.tasks.filter((t) => t.status === 'completed').length,
    tasks: final.tasks.length,
    retries: counts.retried,
    deadLetters: final.deadLetters.length,
    costUsd: final.dag.spentUsd,
    wallSec: Math.round((Date.now() - started) / 100) / 10,
    report: report ?? null,
  };
  const failed = final.dag.status === 'completed' ? undefined : new DagNotCompletedError(dagId, final.dag.status, final.dag.blockedReason);
  // With --json, one JSON document on stdout: the summary, or the error carrying it.
  if (json && failed) throw Object.assign(failed, { details: { ...failed.details, summary } });
  output.result(summary, () => {
    output.line();
    output.line(`DAG ${dagId}: ${final.dag.status}${final.dag.blockedReason ? ` (${final.dag.blockedReason})` : ''}`);
    output.line(`tasks completed ${summary.completed}/${summary.tasks}, retries ${summary.retries}, dead letters ${summary.deadLetters}, cost ${usd(summary.costUsd)}, wall time ${summary.wallSec}s`);
    if (report) output.line(`report: ${path.relative(process.cwd(), report) || report}`);
    output.line(`inspect it: npx dagent status ${dagId}   ·   npx dagent graph ${dagId}`);
  });
  // The main job tells the truth in its exit code too: a DAG that did not complete is a failure (exit 1), with why.
  if (failed) throw failed;
}
