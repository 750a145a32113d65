import type { Command } from 'commander';
import { COMPARE_DEFAULTS } from '../config/index.js';
import { InvalidInputError } from '../errors.js';
import type { CompareSide, CompareTotals, DagComparison } from '../engine/read/compare.js';
import type { RerunChangeRecord } from '../engine/dag/rerun-changed.js';
import { resolver, withDatabase, type CommandContext } from './context.js';
import { Output, usd } from './output.js';
import { rerunLine } from './rerun-text.js';

/** Task keys shown in a line before "and N more". */
const KEYS_SHOWN = 10;

/** `--set PATH=VALUE` collected, later ones winning. */
function setCollect(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const i = value.indexOf('=');
  if (i <= 0) throw new InvalidInputError(`--set ${value}: expected PATH=VALUE (prompt=…, draft.prompt=…, constraints.max_cost_usd=0.5)`, { field: 'set' });
  return { ...previous, [value.slice(0, i)]: value.slice(i + 1) };
}

function keysText(keys: readonly string[]): string {
  if (keys.length === 0) return 'none';
  const shown = keys.slice(0, KEYS_SHOWN).join(', ');
  return keys.length > KEYS_SHOWN ? `${shown} and ${keys.length - KEYS_SHOWN} more` : shown;
}

/** `dagent dag rerun` (the failed tasks again, in the DAG; or the DAG with a change, as a new DAG) and `dagent dag compare`. */
export function dagRunCommands(dag: Command, ctx: CommandContext): void {
  dag
    .command('rerun')
    .description('run a DAG\'s failed tasks again (--from-failed), or re-run a finished DAG with a change (--model, --set) as a new DAG that reuses the unchanged upstream outputs')
    .argument('<dag-id>')
    .option('--from-failed', 'in the same DAG: its dead-lettered and cancelled tasks (a cancelled or blocked DAG runs on)')
    .option('--model <model>', 'a new DAG: every LLM task (one that names a model or requires capability llm) on this model only')
    .option('--set <path=value>', 'a new DAG with this spec field set, repeatable: FIELD (every LLM task) or TASK.FIELD (one task); FIELD is prompt, models, fallback_models, input, input.NAME or constraints.NAME', setCollect)
    .option('--note <text>', 'why, recorded with the events (or the new DAG\'s change)')
    .option('--force', 'with --model or --set: re-run even when an llm-judge step has no active judge agent that can serve it (warned)')
    .option('--json', 'machine-readable output')
    .action(async (dagId: string, opts: { fromFailed?: boolean; model?: string; set?: Record<string, string>; note?: string; force?: boolean; json?: boolean }) => {
      const changing = opts.model !== undefined || opts.set !== undefined;
      if (!!opts.fromFailed === changing) {
        throw new InvalidInputError('dag rerun takes either --from-failed (run the failed tasks again in this DAG) or a change as a new DAG (--model, --set), not both nor neither', { field: 'from-failed' });
      }
      const out = new Output(ctx.io, !!opts.json);
      if (opts.fromFailed) {
        const { dagRerunFailed } = await import('../engine/dag/rerun.js');
        const r = await withDatabase(ctx, (d) => dagRerunFailed(d.db, dagId, { note: opts.note, by: resolver(ctx) }));
        out.result(r, () => out.line(`${dagId}: ${r.reopened.length} task(s) to run again: ${r.reopened.map((t) => `${t.key} (was ${t.previous})`).join(', ')}`));
        return;
      }
      const { dagRerunChanged } = await import('../engine/dag/rerun-changed.js');
      const r = await withDatabase(ctx, (d) => dagRerunChanged(d.db, dagId, { model: opts.model, set: opts.set, setFromText: true }, {
        by: resolver(ctx), note: opts.note, force: opts.force, log: ctx.log,
      }));
      out.result(r, () => {
        out.line(`${r.dagId}: ${rerunLine(r.rerunOf, r.change)}`);
        out.line(`runs: ${keysText(r.rerun)}`);
        out.line(`reused: ${keysText(r.reused)}`);
        for (const w of r.warnings ?? []) ctx.io.stderr(`warning: ${w}\n`);
      });
    });

  dag
    .command('compare')
    .description('two runs of a DAG side by side (a DAG and its rerun): per task, the outputs (shortened), verdicts, cost, tokens, time and attempts, and the totals')
    .argument('<dag-a>')
    .argument('<dag-b>')
    .option('--json', 'machine-readable output, every output whole')
    .action(async (a: string, b: string, opts: { json?: boolean }) => {
      const { dagCompare } = await import('../engine/read/compare.js');
      const c = await withDatabase(ctx, (d) => dagCompare(d.db, a, b));
      const out = new Output(ctx.io, !!opts.json);
      out.result(c, () => compareShow(out, c));
    });
}

/** One output on one line, cut: its line breaks and runs of blanks as one space (control characters are escaped by Output). */
function cell(s: CompareSide | null): string {
  if (!s) return '(no such task)';
  if (s.outputText === null) return `(${s.status})`;
  const text = s.outputText.replace(/\s+/g, ' ').trim();
  return text.length > COMPARE_DEFAULTS.cellChars ? `${text.slice(0, COMPARE_DEFAULTS.cellChars - 1)}…` : text;
}

/** `a → b` of one figure, `-` for a side without the task. */
function pair(a: CompareSide | null, b: CompareSide | null, f: (s: CompareSide) => string): string {
  return `${a ? f(a) : '-'} → ${b ? f(b) : '-'}`;
}

const cost = (s: CompareSide) => (s.costUsd === null ? 'cost unknown' : usd(s.costUsd));
const tokens = (s: CompareSide) => String(s.tokensIn + s.tokensOut);
const time = (s: CompareSide) => (s.durationMs === null ? '-' : durationText(s.durationMs));
const attempts = (s: CompareSide) => (s.reusedFrom ? 'reused' : String(s.attempts));
const verdicts = (s: CompareSide) => (s.verdicts.length === 0 ? '-'
  : s.verdicts.map((v) => `${v.kind}${v.score !== undefined ? ` ${v.score}` : ''} ${v.pass ? 'pass' : 'fail'}`).join(', '));

function durationText(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)}s`;
}

function totalsText(t: CompareTotals): string {
  const unknown = t.costUnknownTasks ? ` + cost unknown for ${t.costUnknownTasks} task(s)` : '';
  return `${usd(t.costUsd)}${unknown}, ${t.tokensIn + t.tokensOut} tokens, ${durationText(t.durationMs)}, ${t.attempts} attempt(s), `
    + `${t.completed}/${t.tasks} completed${t.reused ? ` (${t.reused} reused)` : ''}${t.verdicts ? `, ${t.verdictsPassed}/${t.verdicts} verdicts passed` : ''}`;
}

function compareShow(out: Output, c: DagComparison): void {
  for (const [side, d] of [['A', c.a], ['B', c.b]] as const) {
    out.line(`${side} ${d.id}  ${d.name}  ${d.status}${d.rerunOf ? `  ${rerunLine(d.rerunOf, d.rerunChange as RerunChangeRecord | null)}` : ''}`);
  }
  out.line();
  out.table(['key', 'A output', 'B output', 'verdicts A → B', 'cost A → B', 'tokens A → B', 'time A → B', 'attempts A → B'],
    c.tasks.map((t) => [t.key, cell(t.a), t.sameOutput ? '(same)' : cell(t.b), pair(t.a, t.b, verdicts), pair(t.a, t.b, cost),
      pair(t.a, t.b, tokens), pair(t.a, t.b, time), pair(t.a, t.b, attempts)]));
  out.line();
  out.line(`A: ${totalsText(c.a.totals)}`);
  out.line(`B: ${totalsText(c.b.totals)}`);
  out.line(`${c.outputsDiffering} of ${c.tasks.filter((t) => t.a?.outputText != null && t.b?.outputText != null).length} outputs differ`);
}
