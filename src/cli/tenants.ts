import type { Command } from 'commander';
import { withDatabase, type CommandContext } from './context.js';
import { Output } from './output.js';

/** `dagent tenants …`: tenants and their weights in fair share (docs/priority.md#tenants-and-fair-share). */
export function tenantCommands(program: Command, ctx: CommandContext): void {
  const tenants = program.command('tenants').description('tenants: whose DAGs, schedules and agents, and their weights in fair share');
  const json = (c: Command) => c.option('--json', 'machine-readable output');

  json(tenants.command('create').description('make a tenant').argument('<id>', 'lowercase letters, digits, _ and -')
    .option('--weight <n>', 'its weight in fair share (default 1): tenants with work are served tokens in proportion to their weights', Number)
    .option('--name <text>', 'a name to recognise it by'))
    .action(async (id: string, opts: { weight?: number; name?: string; json?: boolean }) => {
      const { tenantCreate } = await import('../engine/ops/tenants.js');
      const t = await withDatabase(ctx, (d) => tenantCreate(d.db, { id, weight: opts.weight, name: opts.name }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(t, () => out.line(`tenant ${t.id} (weight ${t.weight})`));
    });

  json(tenants.command('set').description('change a tenant\'s weight or name').argument('<id>')
    .option('--weight <n>', 'its weight in fair share', Number)
    .option('--name <text>', 'a name to recognise it by'))
    .action(async (id: string, opts: { weight?: number; name?: string; json?: boolean }) => {
      const { tenantSet } = await import('../engine/ops/tenants.js');
      const t = await withDatabase(ctx, (d) => tenantSet(d.db, id, { weight: opts.weight, name: opts.name }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(t, () => out.line(`tenant ${t.id} (weight ${t.weight})`));
    });

  json(tenants.command('list').description('every tenant: its weight, the share of the tokens served it received against its share of the weights, its work now'))
    .action(async (opts: { json?: boolean }) => {
      const { tenantShares } = await import('../engine/ops/tenants.js');
      const rows = await withDatabase(ctx, (d) => tenantShares(d.db));
      const out = new Output(ctx.io, !!opts.json);
      const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
      out.result(rows, () => out.table(['tenant', 'name', 'weight', 'weight share', 'tokens served', 'served share', 'tasks served', 'ready', 'held', 'open DAGs'],
        rows.map((r) => [r.id, r.name, r.weight, pct(r.weightShare), r.servedTokens, pct(r.servedShare), r.servedTasks, r.ready, r.held, r.dags])));
    });
}
