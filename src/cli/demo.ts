import type { Command } from 'commander';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Database } from '../db/connection.js';
import { dagFileLoad } from '../dag/load.js';
import { agentBeat, agentDeregister, agentRegister } from '../engine/agents.js';
import type { DagSpec } from '../dag/spec.js';
import { positiveInt } from './inspect.js';
import { paramCollect } from './submit.js';
import { taskClaim } from '../engine/claim.js';
import { dagStatus } from '../engine/inspect.js';
import { taskComplete, taskHeartbeat, taskStart } from '../engine/lifecycle.js';
import { dagSubmit } from '../engine/submit.js';
import { maintenanceServices } from '../maintenance/index.js';
import { withDatabase, type CommandContext } from './context.js';
import { usd } from './output.js';

const AGENT_BEAT_MS = 10_000;
const DEFAULT_DAG = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dags/examples/research-report.yaml');

/**
 * The end-to-end demo: submit a DAG, run the maintenance loops and a stand-in
 * agent in this process, and show each transition until the DAG is done. The
 * stand-in agent echoes what it was given; real agents arrive with the agent runtime.
 */
export function demoCommand(program: Command, ctx: CommandContext): void {
  program
    .command('demo')
    .description('submit an example DAG and run it to completion with a stand-in agent, showing progress')
    .argument('[file]', 'DAG file', DEFAULT_DAG)
    .option('-p, --param <name=value>', 'set a DAG param (repeatable)', paramCollect, {})
    .option('--work-ms <ms>', 'simulated work per task (default 300)', positiveInt('--work-ms'), 300)
    .option('--json', 'no progress lines; print the summary as JSON')
    .action(async (file: string, opts: { param: Record<string, string>; workMs: number; json?: boolean }) => {
      const spec = dagFileLoad(file, { params: opts.param });
      await withDatabase(ctx, (d) => demoRun(d, ctx, spec, opts.workMs, !!opts.json));
    });
}

async function demoRun(d: Database, ctx: CommandContext, spec: DagSpec, workMs: number, json: boolean): Promise<void> {
  const out = (s: string) => {
    if (!json) ctx.io.stdout(`${s}\n`);
  };
  const started = Date.now();
  const [submitted] = await dagSubmit(d.db, [spec], { createdBy: 'demo', log: ctx.log });
  const dagId = submitted!.dagId;
  out(`submitted ${spec.name} as ${dagId} (${spec.tasks.length} tasks) from ${spec.sourceFile}`);

  const agentId = `demo-${process.pid}`;
  const capabilities = [...new Set(spec.tasks.flatMap((t) => t.requiredCapabilities))];
  await agentRegister(d.db, { id: agentId, type: 'demo', capabilities, maxConcurrent: 4 });
  out(`agent ${agentId} registered with capabilities [${capabilities.join(', ')}]`);
  const services = maintenanceServices(d.db, ctx.log);
  services.forEach((s) => s.start());
  // Stay visibly alive: the reaper marks an agent without heartbeats offline.
  const beat = setInterval(() => void agentBeat(d.db, agentId).catch(() => {}), AGENT_BEAT_MS);
  try {
    for (;;) {
      const claimed = await taskClaim(d.db, agentId, { limit: 4, dagId, capabilities });
      if (claimed.length === 0) {
        const s = await dagStatus(d.db, dagId);
        if (s.dag.status !== 'running') break;
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      await Promise.all(claimed.map(async (t) => {
        const ref = { taskId: t.id, fence: t.fence };
        await taskStart(d.db, ref);
        out(`  ▶ ${t.key.padEnd(14)} running   (attempt ${t.attempt}, inputs: ${Object.keys(t.inputs).join(', ') || 'none'})`);
        await new Promise((r) => setTimeout(r, workMs / 2));
        await taskHeartbeat(d.db, { ...ref, progress: 0.5, message: 'halfway' });
        await new Promise((r) => setTimeout(r, workMs / 2));
        const costUsd = Math.min(t.maxCostUsd ?? 0.01, 0.01);
        await taskComplete(d.db, { ...ref, output: { task: t.key, title: t.title, prompt: t.spec.prompt ?? null, from: Object.keys(t.inputs) }, costUsd });
        out(`  ✔ ${t.key.padEnd(14)} completed (${usd(costUsd)})`);
      }));
    }
  } finally {
    clearInterval(beat);
    await Promise.all(services.map((s) => s.stop()));
    await agentDeregister(d.db, agentId);
  }
  const s = await dagStatus(d.db, dagId);
  const done = s.tasks.filter((t) => t.status === 'completed').length;
  const retries = s.tasks.reduce((n, t) => n + Math.max(0, t.attempts - 1), 0);
  const wallSec = (Date.now() - started) / 1000;
  if (json) {
    ctx.io.stdout(`${JSON.stringify({ dagId, status: s.dag.status, completed: done, tasks: s.tasks.length, retries, deadLetters: s.deadLetters.length, costUsd: s.dag.spentUsd, wallSec }, null, 2)}\n`);
    return;
  }
  out('');
  out(`DAG ${dagId}: ${s.dag.status}`);
  out(`tasks completed ${done}/${s.tasks.length}, retries ${retries}, dead letters ${s.deadLetters.length}, cost ${usd(s.dag.spentUsd)}, wall time ${wallSec.toFixed(1)}s`);
  out(`inspect it: npx dagent status ${dagId}   ·   npx dagent graph ${dagId}`);
}
