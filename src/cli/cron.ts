import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { configFromEnv } from '../config/index.js';
import { InvalidInputError } from '../errors.js';
import { DEFAULT_TENANT } from '../db/queries/tenants.js';
import {
  scheduleLabel, scheduleList, scheduleNext, schedulePause, scheduleRegister, scheduleRemove, scheduleResume, scheduleTrigger,
} from '../engine/ops/cron.js';
import { withDatabase, type CommandContext } from './context.js';
import { positiveInt } from './inspect.js';
import { Output } from './output.js';
import { dagFilesLoad } from './submit.js';

/** `dagent cron …`: schedules declared by DAG files (docs/schedules.md). */
export function cronCommands(program: Command, ctx: CommandContext): void {
  const cron = program.command('cron').description('cron schedules: DAGs created on a schedule');
  const json = (c: Command) => c.option('--json', 'machine-readable output');
  // Schedule names are per tenant: the one of this name in --tenant (default the default tenant).
  const named = (c: Command) => json(c.argument('<name>').option('--tenant <id>', 'the schedule\'s tenant (default the default tenant)'));
  const keyOf = (name: string, opts: { tenant?: string }) => ({ tenant: opts.tenant ?? DEFAULT_TENANT, name });
  const shown = (name: string, opts: { tenant?: string }) => scheduleLabel(keyOf(name, opts));

  json(cron.command('add').description('register (or update) the schedule a DAG file declares in its schedule: block')
    .argument('<file>', 'DAG YAML file with a schedule: block (per-fire param values go in schedule.params)')
    .option('--tenant <id>', 'the tenant the schedule is named in and its DAGs belong to (default the default tenant)'))
    .action(async (file: string, opts: { json?: boolean; tenant?: string }) => {
      const [spec] = await dagFilesLoad([file], {}, configFromEnv(ctx.io.env).fileRoots);
      if (!spec!.schedule) throw new InvalidInputError(`${file}: no schedule: block (dagent submit runs a DAG once)`);
      const row = await withDatabase(ctx, (d) => scheduleRegister(d.db, spec!, readFileSync(file, 'utf8'), undefined, { createdBy: 'cli', replaceAny: true, tenant: opts.tenant }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(row, () => out.line(`scheduled ${shown(row.name, opts)} (${row.cron}, ${row.timezone}): next fire ${row.nextFireAt.toISOString()}`));
    });

  json(cron.command('list').description('schedules: last and next fire, last run status, skipped and missed counts'))
    .action(async (opts: { json?: boolean }) => {
      const rows = await withDatabase(ctx, (d) => scheduleList(d.db));
      const out = new Output(ctx.io, !!opts.json);
      out.result(rows, () => out.table(
        ['name', 'tenant', 'cron', 'timezone', 'enabled', 'last fire', 'last run', 'next fire', 'fires', 'skipped', 'missed'],
        rows.map((r) => [r.name, r.tenantId, r.cron, r.timezone, r.enabled ? 'yes' : 'paused', r.lastFireAt?.toISOString(),
          r.lastRunStatus ? `${r.lastRunStatus} (${r.lastDagId})` : null, r.enabled ? r.nextFireAt.toISOString() : null, r.fires, r.skipped, r.missed]),
      ));
    });

  named(cron.command('pause').description('stop firing (until resume)'))
    .action(async (name: string, opts: { json?: boolean; tenant?: string }) => {
      await withDatabase(ctx, (d) => schedulePause(d.db, keyOf(name, opts)));
      const out = new Output(ctx.io, !!opts.json);
      out.result({ ...keyOf(name, opts), enabled: false }, () => out.line(`paused ${shown(name, opts)}`));
    });

  named(cron.command('resume').description('fire again, from the next instant after now (the pause is not caught up)'))
    .action(async (name: string, opts: { json?: boolean; tenant?: string }) => {
      const row = await withDatabase(ctx, (d) => scheduleResume(d.db, keyOf(name, opts)));
      const out = new Output(ctx.io, !!opts.json);
      out.result(row, () => out.line(`resumed ${shown(name, opts)}: next fire ${row.nextFireAt.toISOString()}`));
    });

  named(cron.command('remove').description('delete the schedule (DAGs it created stay)'))
    .action(async (name: string, opts: { json?: boolean; tenant?: string }) => {
      await withDatabase(ctx, (d) => scheduleRemove(d.db, keyOf(name, opts)));
      const out = new Output(ctx.io, !!opts.json);
      out.result({ ...keyOf(name, opts), removed: true }, () => out.line(`removed ${shown(name, opts)}`));
    });

  named(cron.command('next').description('the next fire times, by the database clock')
    .option('-n, --count <n>', 'how many (default 5)', positiveInt('--count'), 5))
    .action(async (name: string, opts: { count: number; json?: boolean; tenant?: string }) => {
      const times = await withDatabase(ctx, (d) => scheduleNext(d.db, keyOf(name, opts), opts.count));
      const out = new Output(ctx.io, !!opts.json);
      out.result(times, () => times.forEach((t) => out.line(t.toISOString())));
    });

  named(cron.command('trigger').description('fire now, by hand (ignores overlap; the schedule\'s timing is unchanged)'))
    .action(async (name: string, opts: { json?: boolean; tenant?: string }) => {
      const r = await withDatabase(ctx, (d) => scheduleTrigger(d.db, keyOf(name, opts)));
      const out = new Output(ctx.io, !!opts.json);
      out.result(r, () => out.line(r.dagId));
    });
}
