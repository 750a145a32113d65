import type { Command } from 'commander';
import { InvalidInputError } from '../errors.js';
import { costsReport, priorityOverride } from '../engine/ops/priority.js';
import { dagBudgetSet } from '../engine/dag/dag-status.js';
import { resolver, withDatabase, type CommandContext } from './context.js';
import { Output, usd } from './output.js';
import { positiveInt } from './inspect.js';
import { COSTS_DEFAULTS } from '../config/index.js';
import { dagRunCommands } from './dag-runs.js';

/** `dagent priority` (a human's override), `dagent dag budget`, `dag rerun` and `dag compare` (dag-runs.ts), and `dagent costs` (spend and reservations). */
export function priorityCommands(program: Command, ctx: CommandContext): void {
  program
    .command('priority')
    .description('set the base priority (0–100, lower is more urgent) of a task, or of every unfinished task of a DAG')
    .argument('<task-or-dag-id>')
    .argument('<priority>')
    .option('--json', 'machine-readable output')
    .action(async (id: string, value: string, opts: { json?: boolean }) => {
      const priority = Number(value);
      if (!/^\d+$/.test(value) || priority > 100) throw new InvalidInputError(`priority must be a whole number 0–100 (lower is more urgent), got ${value}`);
      const r = await withDatabase(ctx, (d) => priorityOverride(d.db, id, priority, resolver(ctx)));
      const out = new Output(ctx.io, !!opts.json);
      out.result({ id, priority, ...r }, () => out.line(`${id}: priority ${priority} on ${r.tasks} unfinished task(s)`));
    });

  const dag = program.command('dag').description('change a DAG, re-run a finished one with a change as a new DAG, or compare two runs');
  dagRunCommands(dag, ctx);
  dag
    .command('budget')
    .description('set a running or blocked DAG\'s budget in USD; a DAG blocked on its budget resumes once it can pay for its next task')
    .argument('<dag-id>')
    .requiredOption('--usd <n>', 'the new budget in USD (0 to 100000000)')
    .option('--json', 'machine-readable output')
    .action(async (dagId: string, opts: { usd: string; json?: boolean }) => {
      const amount = Number(opts.usd);
      if (opts.usd.trim() === '' || !Number.isFinite(amount)) throw new InvalidInputError(`--usd must be a number of USD, got ${opts.usd}`);
      const r = await withDatabase(ctx, (d) => dagBudgetSet(d.db, dagId, amount, { by: resolver(ctx) }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(r, () => out.line(`${dagId}: budget ${usd(r.budgetUsd)} (was ${r.previous == null ? 'none' : usd(r.previous)}); ${r.status}${r.blockedReason ? ` (${r.blockedReason})` : ''}`));
    });

  program
    .command('costs')
    .description('spend per day, per agent (budget, reserved, left), per DAG and per model')
    .option('--days <n>', `days of daily spend (default ${COSTS_DEFAULTS.days})`, positiveInt('--days'), COSTS_DEFAULTS.days)
    .option('--json', 'machine-readable output')
    .action(async (opts: { days: number; json?: boolean }) => {
      const r = await withDatabase(ctx, (d) => costsReport(d.db, { days: opts.days }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(r, () => {
        out.line(`daily spend (UTC), last ${opts.days} days:`);
        out.table(['day', 'spent', 'attempts'], r.days.map((d) => [d.day, usd(d.costUsd), d.attempts]));
        out.section('agents:');
        out.table(['agent', 'budget', 'spent', 'reserved', 'left'], r.agents.map((a) => [
          a.id, a.budgetUsd == null ? '-' : usd(a.budgetUsd), usd(a.spentUsd), usd(a.reservedUsd), a.remainingUsd == null ? '-' : usd(a.remainingUsd)]));
        out.section('DAGs:');
        out.table(['dag', 'name', 'status', 'budget', 'spent', 'reserved'], r.dags.map((g) => [
          g.id, g.name, g.status, g.budgetUsd == null ? '-' : usd(g.budgetUsd), usd(g.spentUsd), usd(g.reservedUsd)]));
        if (r.running.length) {
          out.section('attempts running (spent as reported, against what the claim reserves):');
          out.table(['task', 'key', 'agent', 'spent', 'reserved', 'max cost'], r.running.map((t) => [
            t.taskId, t.key, t.agentId, usd(t.spentUsd), usd(t.reservedUsd), t.maxCostUsd == null ? '-' : usd(t.maxCostUsd)]));
        }
        if (r.stops.length) {
          out.section('attempts stopped at a spend limit:');
          out.table(['at', 'task', 'agent', 'limit', 'spent'], r.stops.map((x) => [
            x.at, x.taskId, x.agentId,
            x.limit == null ? '-' : x.limitTokens != null ? `${x.limit} ${x.limitTokens} tokens` : `${x.limit} ${usd(x.limitUsd ?? 0)}`,
            x.spentTokens != null ? `${x.spentTokens} tokens` : x.spentUsd == null ? '-' : usd(x.spentUsd)]));
        }
        if (r.models.length) {
          out.section('usage reported while attempts ran, by model (reports of unknown cost apart):');
          out.table(['model', 'spent', 'tokens in', 'tokens out', 'reports', 'cost unknown'], r.models.map((m) => [
            m.model || '-', m.unpricedReports === m.reports ? 'unknown' : usd(m.costUsd), m.tokensIn, m.tokensOut, m.reports, m.unpricedReports]));
        }
      });
    });
}
