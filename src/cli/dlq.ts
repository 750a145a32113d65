import type { StepVerdict } from '../validation/verdict.js';
import type { Command } from 'commander';
import { InvalidInputError } from '../errors.js';
import { dlqBulk, dlqCancel, dlqEditRetry, dlqList, dlqRetry, dlqShow, type TaskEditInput } from '../engine/ops/dlq.js';
import { editFromEditor, editFromPatchFile } from './dlq-edit.js';
import { resolver, withDatabase, type CommandContext } from './context.js';
import { Output, ago, usd } from './output.js';
import { logDroppedText, logLineText } from './logs.js';

/** How many of the last attempt's log lines `dlq show` prints. */
const DLQ_LOG_TAIL = 20;

interface HistoryItem {
  attempt: number; agent: string | null; outcome: string; error_class: string | null; error: string | null; duration_ms: number; cost_usd: number;
  details: { verdicts?: StepVerdict[] } | null;
}

export function dlqCommands(program: Command, ctx: CommandContext): void {
  const dlq = program.command('dlq').description('review and resolve dead-lettered tasks');
  dlq
    .command('list')
    .description('open dead letters (with --all, resolved ones too): task, reason, error class, attempts, cost')
    .option('--all', 'include resolved entries')
    .option('--dag <id>', 'only entries of this DAG')
    .option('--json', 'machine-readable output')
    .action(async (opts: { all?: boolean; dag?: string; json?: boolean }) => {
      const rows = await withDatabase(ctx, (d) => dlqList(d.db, { all: opts.all, dagId: opts.dag }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(rows, () => out.table(['id', 'task', 'dag', 'error class', 'poison', 'attempts', 'cost', 'reason', 'age', 'resolution'],
        rows.map((r) => [r.id, r.taskKey, r.dagId, r.errorClass, r.poisonPill ? 'yes' : 'no', r.attempts, usd(r.totalCostUsd), r.reason, ago(r.createdAt), r.resolution])));
    });
  dlq
    .command('show')
    .description('one dead letter: why, and every attempt with its error and its validators\' verdicts')
    .argument('<id>')
    .option('--json', 'machine-readable output')
    .action(async (id: string, opts: { json?: boolean }) => {
      const { attemptLogsGet } = await import('../engine/read/attempt-logs.js');
      const s = await withDatabase(ctx, async (d) => {
        const shown = await dlqShow(d.db, id);
        // What the last attempt that logged said: the end of it, where the failure usually is.
        const log = (await attemptLogsGet(d.db, shown.task.id, { tail: DLQ_LOG_TAIL })).attempt ?? null;
        return { ...shown, log };
      });
      const out = new Output(ctx.io, !!opts.json);
      out.result(s, () => {
        const { entry, task } = s;
        out.line(`${entry.id}  task ${task.key} (${task.id}, ${task.type}) in ${entry.dagId}`);
        out.line(`reason: ${entry.reason}`);
        out.line(`poison pill: ${entry.poisonPill ? 'yes' : 'no'}   attempts: ${entry.attempts}   total cost: ${usd(entry.totalCostUsd)}   since ${entry.createdAt.toISOString()}`);
        if (entry.resolution) out.line(`resolved: ${entry.resolution} by ${entry.resolvedBy} at ${entry.resolvedAt?.toISOString()}${entry.resolvedNote ? ` — ${entry.resolvedNote}` : ''}`);
        out.section('failure history:');
        out.table(['#', 'agent', 'outcome', 'error class', 'error', 'duration', 'cost'],
          (entry.history as HistoryItem[]).map((h) => [h.attempt, h.agent, h.outcome, h.error_class, h.error, `${h.duration_ms} ms`, usd(Number(h.cost_usd))]));
        if (s.log) {
          const cut = s.log.lines - s.log.entries.length;
          out.section(`log of attempt ${s.log.attempt}${cut > 0 ? ` (its last ${s.log.entries.length} of ${s.log.lines} lines: dagent logs ${s.task.id} --attempt ${s.log.attempt})` : ''}:`);
          for (const l of s.log.entries) out.line(`  ${logLineText(l)}`);
          const dropped = logDroppedText(s.log);
          if (dropped) out.line(`  ${dropped}`);
        }
        const judged = (entry.history as HistoryItem[]).filter((h) => h.details?.verdicts?.length);
        if (judged.length === 0) return;
        out.section('validation verdicts:');
        out.table(['#', 'step', 'kind', 'verdict', 'score', 'reasons'], judged.flatMap((h) => h.details!.verdicts!.map((v) => [
          h.attempt, v.step + 1, v.kind, v.pass ? 'pass' : 'fail', v.score ?? '', v.reasons.join('; ').slice(0, 300),
        ])));
      });
    });
  const bulkFilters = (c: Command) => c
    .option('--dag <id>', 'every open entry of this DAG (bulk)')
    .option('--type <type>', 'every open entry whose task has this type (bulk)')
    .option('--error-class <class>', 'every open entry with this error class (bulk)')
    .option('--agent <id>', 'every open entry with an attempt by this agent (bulk)');
  type Bulk = { dag?: string; type?: string; errorClass?: string; agent?: string };
  /** The bulk selector, or undefined for one entry by id; exactly one of the two. */
  const selectorOf = (id: string | undefined, o: Bulk) => {
    const selector = { dagId: o.dag, type: o.type, errorClass: o.errorClass, agentId: o.agent };
    const bulk = Object.values(selector).some((v) => v !== undefined);
    if (bulk === (id !== undefined)) throw new InvalidInputError('give one dead-letter id, or filters for a bulk action (--dag, --type, --error-class, --agent), not both');
    return bulk ? selector : undefined;
  };
  bulkFilters(dlq
    .command('retry')
    .description('put a dead-lettered task back to READY; with filters instead of an id, every open entry that matches (at most 1,000)')
    .argument('[id]'))
    .option('--reset-attempts', 'give the task its full attempt budget again')
    .option('--note <text>', 'why')
    .option('--edit', 'first change the task (prompt, input, models, requires, priority, attempts, cost cap) in $VISUAL or $EDITOR')
    .option('--patch <file>', 'first change the task: a YAML or JSON file of the fields to change, as --edit shows them')
    .option('--json', 'machine-readable output')
    .action(async (id: string | undefined, opts: Bulk & { resetAttempts?: boolean; note?: string; edit?: boolean; patch?: string; json?: boolean }) => {
      const out = new Output(ctx.io, !!opts.json);
      const selector = selectorOf(id, opts);
      if ((opts.edit || opts.patch) && (selector || (opts.edit && opts.patch))) throw new InvalidInputError('--edit and --patch change one dead letter\'s task: give its id, and one of them');
      if (opts.edit || opts.patch) {
        const resolution = { resetAttempts: opts.resetAttempts, note: opts.note, by: resolver(ctx) };
        const patch = opts.patch ? editFromPatchFile(opts.patch) : undefined;
        const { entry, taskStatus } = await withDatabase(ctx, async (d) => {
          const edit: TaskEditInput = patch ?? editFromEditor((await dlqShow(d.db, id!)).task, ctx.io, id!);
          const entry = await dlqEditRetry(d.db, id!, edit, resolution);
          return { entry, taskStatus: (await dlqShow(d.db, id!)).task.status };
        });
        return out.result({ ...entry, taskStatus }, () => out.line(`${entry.id}: edited and retried; task ${entry.taskId} is ${taskStatus} again`));
      }
      if (selector) {
        const r = await withDatabase(ctx, (d) => dlqBulk(d.db, selector, 'retry', { resetAttempts: opts.resetAttempts, note: opts.note, by: resolver(ctx) }));
        return out.result(r, () => out.line(`retried ${r.ids.length} dead letter(s)${r.ids.length ? `: ${r.ids.join(', ')}` : ''}`));
      }
      const { entry, taskStatus } = await withDatabase(ctx, async (d) => {
        const entry = await dlqRetry(d.db, id!, { resetAttempts: opts.resetAttempts, note: opts.note, by: resolver(ctx) });
        return { entry, taskStatus: (await dlqShow(d.db, id!)).task.status };
      });
      out.result({ ...entry, taskStatus }, () => out.line(`${entry.id}: retried; task ${entry.taskId} is ${taskStatus} again`));
    });
  bulkFilters(dlq
    .command('cancel')
    .description('give a dead-lettered task up, and what depends on it; with filters instead of an id, every open entry that matches (at most 1,000)')
    .argument('[id]'))
    .requiredOption('--note <text>', 'why the task is given up (recorded)')
    .option('--json', 'machine-readable output')
    .action(async (id: string | undefined, opts: Bulk & { note: string; json?: boolean }) => {
      const out = new Output(ctx.io, !!opts.json);
      const selector = selectorOf(id, opts);
      if (selector) {
        const r = await withDatabase(ctx, (d) => dlqBulk(d.db, selector, 'cancel', { note: opts.note, by: resolver(ctx) }));
        return out.result(r, () => out.line(`cancelled ${r.ids.length} dead letter(s)${r.ids.length ? `: ${r.ids.join(', ')}` : ''}`));
      }
      const r = await withDatabase(ctx, (d) => dlqCancel(d.db, id!, { note: opts.note, by: resolver(ctx) }));
      out.result(r, () => out.line(`${r.id}: cancelled task ${r.taskId} and what depended on it`));
    });
}
