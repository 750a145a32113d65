import type { Command } from 'commander';
import { withDatabase, type CommandContext } from './context.js';
import { Output } from './output.js';

/** `dagent tenants …`: tenants and their weights in fair share (docs/priority.md#tenants-and-fair-share). */
export function tenantCommands(program: Command, ctx: CommandContext): void {
  const tenants = program.command('tenants').description('tenants: whose DAGs, schedules and agents, and their weights in fair share');
  const json = (c: Command) => c.option('--json', 'machine-readable output');

  const quotas = (c: Command) => c
    .option('--max-running <n>', 'quota: most of its tasks held by agents at once (claimed, running, validating); none clears it', quota)
    .option('--max-queued <n>', 'quota: most of its tasks not yet finished; a submit past it is refused (exit 3, HTTP 429); none clears it', quota)
    .option('--max-usd-per-day <usd>', 'quota: most USD its DAGs spend (and hold reserved) in one UTC day; past it its work waits for the next day; none clears it', quota)
    .option('--max-tokens-per-minute <n>', 'quota: most estimated tokens of its tasks claimed in a minute; past it its work waits for the minute to end; none clears it', quota);

  json(quotas(tenants.command('create').description('make a tenant').argument('<id>', 'lowercase letters, digits, _ and -')
    .option('--weight <n>', 'its weight in fair share (default 1): tenants with work are served tokens in proportion to their weights', Number)
    .option('--name <text>', 'a name to recognise it by')))
    .action(async (id: string, opts: Settings & { json?: boolean }) => {
      const { tenantCreate } = await import('../engine/ops/tenants.js');
      const t = await withDatabase(ctx, (d) => tenantCreate(d.db, { id, ...settings(opts) }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(t, () => out.line(`tenant ${t.id} (weight ${t.weight})`));
    });

  json(quotas(tenants.command('set').description('change a tenant\'s weight, name or quotas').argument('<id>')
    .option('--weight <n>', 'its weight in fair share', Number)
    .option('--name <text>', 'a name to recognise it by')))
    .action(async (id: string, opts: Settings & { json?: boolean }) => {
      const { tenantSet } = await import('../engine/ops/tenants.js');
      const t = await withDatabase(ctx, (d) => tenantSet(d.db, id, settings(opts)));
      const out = new Output(ctx.io, !!opts.json);
      out.result(t, () => out.line(`tenant ${t.id} (weight ${t.weight})`));
    });

  json(tenants.command('list').description('every tenant: its weight, the share of the tokens served it received against its share of the weights, its work now'))
    .action(async (opts: { json?: boolean }) => {
      const { tenantShares } = await import('../engine/ops/tenants.js');
      const rows = await withDatabase(ctx, (d) => tenantShares(d.db));
      const out = new Output(ctx.io, !!opts.json);
      const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
      out.result(rows, () => {
        out.table(['tenant', 'name', 'weight', 'weight share', 'tokens served', 'served share', 'tasks served', 'ready', 'held', 'open DAGs', 'quotas'],
          rows.map((r) => [r.id, r.name, r.weight, pct(r.weightShare), r.servedTokens, pct(r.servedShare), r.servedTasks, r.ready, r.held, r.dags,
            [r.maxRunning === null ? '' : `running ≤ ${r.maxRunning}`, r.maxQueued === null ? '' : `queued ≤ ${r.maxQueued}`,
              r.maxUsdPerDay === null ? '' : `≤ ${r.maxUsdPerDay} USD/day`, r.maxTokensPerMinute === null ? '' : `≤ ${r.maxTokensPerMinute} tokens/min`]
              .filter(Boolean).join(', ') || null]));
        for (const r of rows) if (r.waiting) out.line(`${r.id} waits: ${r.waiting}`);
      });
    });
}

interface Settings {
  weight?: number; name?: string; maxRunning?: number | 'none'; maxQueued?: number | 'none'; maxUsdPerDay?: number | 'none'; maxTokensPerMinute?: number | 'none';
}

function settings(o: Settings) {
  const q = (v: number | 'none' | undefined) => (v === 'none' ? null : v);
  return {
    weight: o.weight, name: o.name, maxRunning: q(o.maxRunning), maxQueued: q(o.maxQueued), maxUsdPerDay: q(o.maxUsdPerDay), maxTokensPerMinute: q(o.maxTokensPerMinute),
  };
}

/** A quota as typed: a number, or `none` to clear it (anything else is left to the check, which names it). */
function quota(v: string): number | 'none' {
  return v.trim() === 'none' ? 'none' : Number(v);
}
