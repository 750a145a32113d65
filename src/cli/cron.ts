import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { configFromEnv } from '../config/index.js';
import { InvalidInputError } from '../errors.js';
import {
  scheduleList, scheduleNext, schedulePause, scheduleRegister, scheduleRemove, scheduleResume, scheduleTrigger,
} from '../engine/ops/cron.js';
import { withDatabase, type CommandContext } from './context.js';
import { positiveInt } from './inspect.js';
import { Output } from './output.js';
import { dagFilesLoad } from './submit.js';

/** `dagent cron …`: schedules declared by DAG files (docs/schedules.md). */
export function cronCommands(program: Command, ctx: CommandContext): void {
  const cron = program.command('cron').description('cron schedules: DAGs created on a schedule');
  const json = (c: Command) => c.option('--json', 'machine-readable output');

  json(cron.command('add').description('register (or update) the schedule a DAG file declares in its schedule: block')
    .argument('<file>', 'DAG YAML file with a schedule: block (per-fire param values go in schedule.params)'))
    .action(async (file: string, opts: { json?: boolean }) => {
      const [spec] = await dagFilesLoad([file], {}, configFromEnv(ctx.io.env).fileRoots);
      if (!spec!.schedule) throw new InvalidInputError(`${file}: no schedule: block (dagent submit runs a DAG once)`);
      const row = await withDatabase(ctx, (d) => scheduleRegister(d.db, spec!, readFileSync(file, 'utf8')));
      const out = new Output(ctx.io, !!opts.json);
      out.result(row, () => out.line(`scheduled ${row.name} (${row.cron}, ${row.timezone}): next fire ${row.nextFireAt.toISOString()}`));
    });

  json(cron.command('list').description('schedules: last and next fire, last run status, skipped and missed counts'))
    .action(async (opts: { json?: boolean }) => {
      const rows = await withDatabase(ctx, (d) => scheduleList(d.db));
      const out = new Output(ctx.io, !!opts.json);
      out.result(rows, () => out.table(
        ['name', 'cron', 'timezone', 'enabled', 'last fire', 'last run', 'next fire', 'fires', 'skipped', 'missed'],
        rows.map((r) => [r.name, r.cron, r.timezone, r.enabled ? 'yes' : 'paused', r.lastFireAt?.toISOString(),
          r.lastRunStatus ? `${r.lastRunStatus} (${r.lastDagId})` : null, r.enabled ? r.nextFireAt.toISOString() : null, r.fires, r.skipped, r.missed]),
      ));
    });

  json(cron.command('pause').description('stop firing (until resume)').argument('<name>'))
    .action(async (name: string, opts: { json?: boolean }) => {
      await withDatabase(ctx, (d) => schedulePause(d.db, name));
      const out = new Output(ctx.io, !!opts.json);
      out.result({ name, enabled: false }, () => out.line(`paused ${name}`));
    });

  json(cron.command('resume').description('fire again, from the next instant after now (the pause is not caught up)').argument('<name>'))
    .action(async (name: string, opts: { json?: boolean }) => {
      const row = await withDatabase(ctx, (d) => scheduleResume(d.db, name));
      const out = new Output(ctx.io, !!opts.json);
      out.result(row, () => out.line(`resumed ${name}: next fire ${row.nextFireAt.toISOString()}`));
    });

  json(cron.command('remove').description('delete the schedule (DAGs it created stay)').argument('<name>'))
    .action(async (name: string, opts: { json?: boolean }) => {
      await withDatabase(ctx, (d) => scheduleRemove(d.db, name));
      const out = new Output(ctx.io, !!opts.json);
      out.result({ name, removed: true }, () => out.line(`removed ${name}`));
    });

  json(cron.command('next').description('the next fire times, by the database clock').argument('<name>')
    .option('-n, --count <n>', 'how many (default 5)', positiveInt('--count'), 5))
    .action(async (name: string, opts: { count: number; json?: boolean }) => {
      const times = await withDatabase(ctx, (d) => scheduleNext(d.db, name, opts.count));
      const out = new Output(ctx.io, !!opts.json);
      out.result(times, () => times.forEach((t) => out.line(t.toISOString())));
    });

  json(cron.command('trigger').description('fire now, by hand (ignores overlap; the schedule\'s timing is unchanged)').argument('<name>'))
    .action(async (name: string, opts: { json?: boolean }) => {
      const r = await withDatabase(ctx, (d) => scheduleTrigger(d.db, name));
      const out = new Output(ctx.io, !!opts.json);
      out.result(r, () => out.line(r.dagId));
    });
}
