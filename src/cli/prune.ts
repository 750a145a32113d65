import type { Command } from 'commander';
import { InvalidInputError } from '../errors.js';
import { RETENTION_DEFAULTS, configFromEnv, retentionParse } from '../config/index.js';
import { resolver, withDatabase, type CommandContext } from './context.js';
import { Output } from './output.js';

/** `dagent prune`: delete finished DAGs (and the rest retention covers) older than a period, now, in small batches. */
export function pruneCommand(program: Command, ctx: CommandContext): void {
  program
    .command('prune')
    .description('delete finished DAGs (with their tasks, attempts, outputs, logs, events), old events, webhook deliveries and long-offline agents, in small batches')
    .option('--older-than <period>', `finished more than this long ago: 30d, 12h, 90m (default DAGENT_RETENTION, else ${RETENTION_DEFAULTS.period})`)
    .option('--dry-run', 'count what would be deleted, and delete nothing')
    .option('--json', 'machine-readable output')
    .action(async (opts: { olderThan?: string; dryRun?: boolean; json?: boolean }) => {
      const olderThanSec = pruneOlderThan(opts.olderThan, ctx.io.env);
      const { prune, prunePreview } = await import('../engine/ops/retention.js');
      const out = new Output(ctx.io, !!opts.json);
      await withDatabase(ctx, async (d) => {
        const preview = await prunePreview(d.db, olderThanSec);
        if (opts.dryRun) {
          out.result({ dry_run: true, older_than_sec: olderThanSec, would_delete: countsJson(preview), dead_letters_kept: preview.deadLettersKept }, () => {
            out.line(`would delete ${countsText(preview)}`);
            keptLine(out, preview.deadLettersKept);
          });
          return;
        }
        const done = await prune(d.db, { olderThanSec, by: resolver(ctx) });
        out.result({ dry_run: false, older_than_sec: olderThanSec, deleted: countsJson(done), dead_letters_kept: preview.deadLettersKept }, () => {
          out.line(`deleted ${countsText(done)}`);
          keptLine(out, preview.deadLettersKept);
        });
      });
    });
}

/** The period from --older-than, else DAGENT_RETENTION, else the default; `off` means nothing to prune here. */
function pruneOlderThan(option: string | undefined, env: NodeJS.ProcessEnv): number {
  if (option !== undefined) {
    const r = retentionParse(option);
    if (typeof r === 'string') throw new InvalidInputError(`--older-than: ${r}`, { field: 'older-than' });
    if (r === null) throw new InvalidInputError('--older-than: off prunes nothing; give a period like 30d', { field: 'older-than' });
    return r;
  }
  const configured = configFromEnv(env).retentionSec;
  if (configured === null) throw new InvalidInputError('DAGENT_RETENTION is off: give --older-than to prune anyway', { field: 'older-than' });
  return configured;
}

interface Counts { dags: number; tasks: number; attempts: number; logLines: number; events: number; deadLetters: number; agents: number; deliveries: number }

function countsJson(c: Counts) {
  return {
    dags: c.dags, tasks: c.tasks, attempts: c.attempts, log_lines: c.logLines, events: c.events,
    dead_letters: c.deadLetters, agents: c.agents, webhook_deliveries: c.deliveries,
  };
}

function countsText(c: Counts): string {
  const n = (v: number, one: string, many = `${one}s`) => `${v.toLocaleString('en-US')} ${v === 1 ? one : many}`;
  return `${n(c.dags, 'DAG')} (${n(c.tasks, 'task')}, ${n(c.attempts, 'attempt')}, ${n(c.logLines, 'log line')}, ${n(c.deadLetters, 'resolved dead letter')}), `
    + `${n(c.events, 'event')}, ${n(c.agents, 'offline agent')}, ${n(c.deliveries, 'webhook delivery', 'webhook deliveries')}`;
}

function keptLine(out: Output, kept: number): void {
  if (kept > 0) out.line(`kept ${kept.toLocaleString('en-US')} open dead letter(s) older than the period, with their DAGs: resolve them (dagent dlq) to let them go`);
}
