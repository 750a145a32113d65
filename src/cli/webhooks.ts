import type { Command } from 'commander';
import { urlRedact } from '../webhooks/post.js';
import { webhookAdd, webhookDeliveryList, webhookList, webhookRemove } from '../webhooks/webhooks.js';
import { withDatabase, type CommandContext } from './context.js';
import { configFromEnv } from '../config/index.js';
import { Output, ago } from './output.js';

/** `dagent webhooks …`: the URLs events are POSTed to, and their deliveries. */
export function webhookCommands(program: Command, ctx: CommandContext): void {
  const hooks = program.command('webhooks').description('POST a JSON event to URLs on dead letters (and DAG blocked/completed/cancelled if subscribed)');
  hooks
    .command('add')
    .description('add a webhook (loopback, link-local and metadata addresses are refused unless DAGENT_WEBHOOK_ALLOW_HOSTS allows the host)')
    .argument('<url>')
    .option('--events <types>', 'comma-separated: task.dead_lettered, task.waiting, dag.blocked, dag.completed, dag.cancelled (default task.dead_lettered)')
    .option('--secret <secret>', 'sign each body: Dagent-Signature: sha256=<HMAC>')
    .option('--tenant <id>', 'only this tenant\'s events (default every tenant\'s)')
    .option('--json', 'machine-readable output')
    .action(async (url: string, opts: { events?: string; secret?: string; tenant?: string; json?: boolean }) => {
      const events = opts.events?.split(',').map((e) => e.trim()).filter(Boolean);
      const row = await withDatabase(ctx, (d) => webhookAdd(d.db, { url, events, secret: opts.secret, tenant: opts.tenant, allowHosts: configFromEnv(ctx.io.env).webhookAllowHosts }));
      const out = new Output(ctx.io, !!opts.json);
      const shown = { ...row, url: urlRedact(row.url), secret: row.secret ? '(set)' : null };
      out.result(shown, () => out.line(`${row.id} → ${shown.url} on ${row.events.join(', ')}${row.tenantId ? ` of tenant ${row.tenantId}` : ''}`));
    });
  hooks
    .command('list')
    .description('the webhooks: id, URL, the events each receives, the tenant whose events they are, signed, enabled')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      const rows = await withDatabase(ctx, (d) => webhookList(d.db));
      const out = new Output(ctx.io, !!opts.json);
      out.result(rows, () => out.table(['id', 'url', 'events', 'tenant', 'signed', 'enabled'],
        rows.map((r) => [r.id, r.url, r.events.join(','), r.tenantId ?? 'every', r.signed ? 'yes' : 'no', r.enabled ? 'yes' : 'no'])));
    });
  hooks
    .command('remove')
    .description('remove a webhook')
    .argument('<id>')
    .action(async (id: string) => {
      await withDatabase(ctx, (d) => webhookRemove(d.db, id));
      ctx.io.stdout(`removed ${id}\n`);
    });
  hooks
    .command('deliveries')
    .description('webhook deliveries (the latest 100): event, status, attempts, the last answer or error, the next try')
    .option('--webhook <id>', 'only this webhook\'s')
    .option('--json', 'machine-readable output')
    .action(async (opts: { webhook?: string; json?: boolean }) => {
      const rows = await withDatabase(ctx, (d) => webhookDeliveryList(d.db, { webhookId: opts.webhook }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(rows, () => out.table(['id', 'webhook', 'event', 'type', 'status', 'attempts', 'last', 'next', 'created'],
        rows.map((r) => [r.id, r.webhookId, r.eventId, r.eventType, r.status, r.attempts, r.lastStatus ?? r.lastError, r.status === 'pending' ? r.nextAttemptAt.toISOString() : null, ago(r.createdAt)])));
    });
}
