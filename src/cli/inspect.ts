import type { Command } from 'commander';
import { configFromEnv } from '../config/index.js';
import { existsSync } from 'node:fs';
import { dagFileLoad } from '../dag/load.js';
import { graphCollapse, graphRender, type GraphFormat } from '../dag/render.js';
import { InvalidInputError } from '../errors.js';
import type { RerunChangeRecord } from '../engine/dag/rerun-changed.js';
import { rerunLine } from './rerun-text.js';
import { dagStatus, statsGet, taskListFiltered, taskShow } from '../engine/read/inspect.js';
import { unclaimableList } from '../engine/ops/priority.js';
import { resolver, withDatabase, type CommandContext } from './context.js';
import { Output, ago, usd } from './output.js';
import { paramCollect } from './submit.js';

/** The agent column: the holder of a leased task, or who finished it; not a past holder of a task waiting again. */
function agentShown(status: string, claimedBy: string | null): string | null {
  return ['ready', 'pending', 'retrying', 'created'].includes(status) ? null : claimedBy;
}

export function positiveInt(option: string) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new InvalidInputError(`${option} ${v}: expected a whole number ≥ 1`);
    return n;
  };
}

export function inspectCommands(program: Command, ctx: CommandContext): void {
  program
    .command('status')
    .description('a DAG and its tasks')
    .argument('<dag-id>')
    .option('--json', 'machine-readable output')
    .action(async (dagId: string, opts: { json?: boolean }) => {
      const s = await withDatabase(ctx, (d) => dagStatus(d.db, dagId));
      const out = new Output(ctx.io, !!opts.json);
      out.result(s, () => {
        const { dag } = s;
        out.line(`${dag.id}  ${dag.name}${dag.title ? ` — ${dag.title}` : ''}`);
        const count = (st: string) => s.tasks.filter((t) => t.status === st).length;
        const cancelled = count('cancelled');
        out.line(`status ${dag.status}   tasks ${count('completed')}/${dag.tasksTotal} completed${cancelled ? `, ${cancelled} cancelled` : ''}   spent ${usd(dag.spentUsd)}${dag.budgetUsd != null ? ` of ${usd(dag.budgetUsd)}` : ''}   created ${ago(dag.createdAt)} by ${dag.createdBy}`);
        if (dag.blockedReason) out.line(`blocked: ${dag.blockedReason}`);
        if (dag.rerunOf) out.line(rerunLine(dag.rerunOf, dag.rerunChange as RerunChangeRecord | null));
        out.line();
        // A task a rerun carried over ran on no agent: it holds the output of the task it was reused from.
        out.table(['key', 'status', 'attempts', 'agent', 'priority', 'type', 'id'],
          s.tasks.map((t) => [t.key, t.status, `${t.attempts}/${t.maxAttempts}`, t.reusedFrom ? '(reused)' : agentShown(t.status, t.claimedBy), t.priority, t.type, t.id]));
        for (const d of s.deadLetters) out.line(`dead letter ${d.id}: ${d.taskKey}: ${d.reason}`);
        if (s.reruns.length) out.line(`reruns: ${s.reruns.map((r) => `${r.id} (${r.status})`).join(', ')}`);
      });
    });

  const task = program.command('task').description('inspect one task, or run it again');
  task
    .command('show')
    .description('a task: its spec, inputs, output, attempts and events')
    .argument('<task-id>')
    .option('--json', 'machine-readable output')
    .action(async (taskId: string, opts: { json?: boolean }) => {
      const s = await withDatabase(ctx, (d) => taskShow(d.db, taskId));
      const out = new Output(ctx.io, !!opts.json);
      out.result(s, () => {
        const t = s.task;
        out.line(`${t.id}  ${t.key} (${t.type})  in ${t.dagId}`);
        const replayed = s.attempts.reduce((sum, a) => sum + a.replayedCostUsd, 0);
        out.line(`status ${t.status}  attempts ${t.attempts}/${t.maxAttempts}  priority ${t.priority}  agent ${t.claimedBy ?? '-'}  cost ${usd(t.costUsd)}`
          + (replayed > 0 ? ` (and ${usd(replayed)} of durable steps replayed, not paid again)` : ''));
        if (t.lastError) out.line(`last error: ${t.lastError}`);
        out.line(`spec: ${JSON.stringify(t.spec)}`);
        out.line(`inputs: ${JSON.stringify(s.inputs)}`);
        out.line(`output: ${JSON.stringify(t.output)}`);
        out.section('attempts:');
        out.table(['#', 'agent', 'outcome', 'error class', 'error', 'duration', 'cost', 'replayed'],
          s.attempts.map((a) => [a.attempt, a.agentId, a.outcome, a.errorClass, a.errorMessage, `${a.durationMs} ms`, usd(a.costUsd), a.replayedCostUsd > 0 ? usd(a.replayedCostUsd) : null]));
        out.section('events:');
        out.table(['at', 'type', 'agent', 'data'], s.events.map((e) => [e.at.toISOString(), e.type, e.agentId, JSON.stringify(e.data)]));
      });
    });

  task
    .command('steps')
    .description('the durable steps a task\'s attempts recorded, and those later attempts replayed instead of running')
    .argument('<task-id>')
    .option('--json', 'machine-readable output')
    .action(async (taskId: string, opts: { json?: boolean }) => {
      const { stepReplaysList, stepsList } = await import('../engine/attempt/steps.js');
      const r = await withDatabase(ctx, async (d) => ({ steps: await stepsList(d.db, taskId), replays: await stepReplaysList(d.db, taskId) }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(r, () => {
        if (r.steps.length === 0) out.line(`${taskId}: no durable steps recorded`);
        else {
          out.table(['name', 'scope', 'attempt', 'recorded at', 'size', 'duration', 'cost', 'tokens in/out'],
            r.steps.map((st) => [st.name, st.scope, st.attempt, st.recordedAt.toISOString(), `${st.sizeBytes} B`,
              st.durationMs === null ? null : `${st.durationMs} ms`, usd(st.costUsd), `${st.tokensIn}/${st.tokensOut}`]));
        }
        if (r.replays.length === 0) return;
        const saved = r.replays.reduce((sum, x) => sum + x.costUsd, 0);
        out.section(`replayed (${r.replays.length}, ${usd(saved)} not paid again):`);
        out.table(['name', 'by attempt', 'replayed at', 'cost when recorded'],
          r.replays.map((x) => [x.name, x.attempt, x.replayedAt.toISOString(), usd(x.costUsd)]));
      });
    });

  task
    .command('rerun')
    .description('run a completed, dead-lettered or cancelled task again: a fresh attempt budget, its history kept')
    .argument('<task-id>')
    .option('--downstream', 'everything downstream of it too (refused while an agent holds one of them)')
    .option('--from-step <name>', 'keep the durable steps the task recorded before this one (it replays them); by default a re-run starts without its steps')
    .option('--note <text>', 'why, recorded with the event')
    .option('--json', 'machine-readable output')
    .action(async (taskId: string, opts: { downstream?: boolean; fromStep?: string; note?: string; json?: boolean }) => {
      const { taskRerun } = await import('../engine/dag/rerun.js');
      const r = await withDatabase(ctx, (d) => taskRerun(d.db, taskId, { downstream: opts.downstream, fromStep: opts.fromStep, note: opts.note, by: resolver(ctx) }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(r, () => out.line(`${r.dagId}: ${r.reopened.length} task(s) to run again: ${r.reopened.map((t) => `${t.key} (was ${t.previous})`).join(', ')}`
        + (r.stepsDropped ? `; ${r.stepsDropped} durable step(s) deleted` : '')));
    });

  program
    .command('tasks')
    .description('list tasks')
    .option('--dag <id>', 'only tasks of this DAG')
    .option('--status <status>', 'only tasks in this state')
    .option('--limit <n>', 'at most this many (default 200)', positiveInt('--limit'), 200)
    .option('--unclaimable', 'only READY tasks no agent can take now, with the reason')
    .option('--json', 'machine-readable output')
    .action(async (opts: { dag?: string; status?: string; limit: number; unclaimable?: boolean; json?: boolean }) => {
      const out = new Output(ctx.io, !!opts.json);
      if (opts.unclaimable) {
        const rows = await withDatabase(ctx, (d) => unclaimableList(d.db, opts.limit));
        out.result(rows, () => {
          if (rows.length === 0) return out.line('every READY task can be claimed by some active agent');
          out.table(['id', 'dag', 'key', 'ready for', 'reason'], rows.map((t) => [t.id, t.dagId, t.key, `${t.readySec.toFixed(0)}s`, t.detail]));
        });
        return;
      }
      const rows = await withDatabase(ctx, (d) => taskListFiltered(d.db, { dagId: opts.dag, status: opts.status, limit: opts.limit }));
      out.result(rows, () => out.table(['id', 'dag', 'key', 'status', 'priority', 'effective', 'attempts', 'agent', 'flags'],
        rows.map((t) => [t.id, t.dagId, t.key, t.status, t.priority, t.effectivePriority.toFixed(2), `${t.attempts}/${t.maxAttempts}`,
          agentShown(t.status, t.claimedBy), t.deadlineMissed ? 'deadline missed' : ''])));
    });

  program
    .command('stats')
    .description('counts by status and priority tier, oldest READY age, tenants and their shares, agents')
    .option('--tenant <id>', 'counts and oldest READY age of this tenant only')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean; tenant?: string }) => {
      const s = await withDatabase(ctx, (d) => statsGet(d.db, { tenant: opts.tenant }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(s, () => {
        if (s.tenant !== null) out.line(`tenant ${s.tenant}:`);
        out.table(['status', 'tier', 'tasks'], s.counts.map((c) => [c.status, c.tier, c.n]));
        out.line(`oldest READY: ${s.oldestReadyAgeSec == null ? '-' : `${s.oldestReadyAgeSec.toFixed(1)}s`}`);
        // One tenant (the default, with nothing else) needs no table of shares.
        if (s.tenants.length > 1 || s.tenant !== null) {
          const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
          out.section('tenants:');
          out.table(['tenant', 'weight share', 'served share', 'ready', 'held', 'waits'],
            s.tenants.map((t) => [t.id, pct(t.weightShare), pct(t.servedShare), t.ready, t.held, t.waiting]));
        }
        for (const p of s.pausedModels) out.line(`model ${p.model} paused for ${Math.ceil(p.remainingSec)}s (rate limit: ${p.reason ?? '-'})`);
        out.section('agents:');
        out.table(['id', 'type', 'status', 'capabilities', 'heartbeat', 'spent'],
          s.agents.map((a) => [a.id, a.type, a.status, a.capabilities.join(','), ago(a.heartbeatAt), `${usd(a.spentUsd)}${a.budgetUsd != null ? ` / ${usd(a.budgetUsd)}` : ''}`]));
        out.section('maintenance loops:');
        out.table(['loop', 'node', 'since', 'last ran', 'lease'],
          s.loops.map((l) => [l.name, l.holder, ago(l.acquiredAt), ago(l.ranAt), l.live ? 'held' : 'lapsed']));
      });
    });

  program
    .command('graph')
    .description('draw a DAG (from the database, with statuses, or from a file)')
    .argument('<dag-id-or-file>')
    .option('--format <format>', 'mermaid or dot', 'mermaid')
    .option('--groups <how>', 'expanded (each group\'s tasks in a box) or collapsed (a group, and a task\'s subtasks, as one node)', 'expanded')
    .option('-p, --param <name=value>', 'DAG param, when drawing a file', paramCollect, {})
    .option('--json', 'machine-readable output')
    .action(async (target: string, opts: { format: string; groups: string; param: Record<string, string>; json?: boolean }) => {
      if (opts.format !== 'mermaid' && opts.format !== 'dot') throw new InvalidInputError(`--format must be mermaid or dot, got ${opts.format}`);
      if (opts.groups !== 'expanded' && opts.groups !== 'collapsed') throw new InvalidInputError(`--groups must be expanded or collapsed, got ${opts.groups}`);
      let title: string;
      let nodes: Array<{ key: string; status?: string }>;
      let edges: Array<{ upstream: string; downstream: string }>;
      if (existsSync(target)) {
        const spec = await dagFileLoad(target, { params: opts.param, roots: configFromEnv(ctx.io.env).fileRoots });
        title = spec.name;
        nodes = spec.tasks.map((t) => ({ key: t.key }));
        edges = spec.tasks.flatMap((t) => t.dependsOn.map((u) => ({ upstream: u, downstream: t.key })));
      } else {
        const s = await withDatabase(ctx, (d) => dagStatus(d.db, target));
        title = s.dag.name;
        nodes = s.tasks.map((t) => ({ key: t.key, status: t.status }));
        edges = s.edges;
      }
      if (opts.groups === 'collapsed') ({ nodes, edges } = graphCollapse(nodes, edges));
      const text = graphRender(opts.format as GraphFormat, title, nodes, edges);
      new Output(ctx.io, !!opts.json).result({ format: opts.format, graph: text }, () => ctx.io.stdout(`${text}\n`));
    });
}
