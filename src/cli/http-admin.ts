import type { Command } from 'commander';
import { tokenAgentKnown, tokenCreate, tokenList, tokenRevoke, VALIDATOR_PREFIX, type Grant, type TokenRole } from '../auth/tokens.js';
import { urlRedact } from '../webhooks/post.js';
import { webhookAdd, webhookDeliveryList, webhookList, webhookRemove } from '../webhooks/webhooks.js';
import { withDatabase, type CommandContext } from './context.js';
import { openApiDocumentBuild } from '../http/server.js';
import { configFromEnv } from '../config/index.js';
import { Output, ago } from './output.js';

/** `dagent tokens …` and `dagent webhooks …`: the HTTP API's credentials and the notification subscriptions. */
export function httpAdminCommands(program: Command, ctx: CommandContext): void {
  const tokens = program.command('tokens').description('bearer tokens for the HTTP API (stored hashed; the secret is shown once)');
  tokens
    .command('create')
    .description('create a token: admin (everything), submit (submit DAGs and read), read (read only) or agent (one agent, within a grant)')
    .requiredOption('--role <role>', 'admin, submit, read, signal or agent')
    .option('--agent <id>', 'agent tokens: the agent it acts as')
    .option('--capabilities <list>', 'agent tokens: comma-separated capabilities it may register (default none)', list)
    .option('--validators <list>', 'agent tokens: validator capabilities it may register, by name (test, judge: validate:test, validate:judge)', list)
    .option('--budget-usd <n>', 'agent tokens: most budget it may register', Number)
    .option('--max-concurrent <n>', 'agent tokens: most tasks at once it may register', Number)
    .option('--name <text>', 'a label to recognise the token by')
    .option('--json', 'machine-readable output')
    .action(async (opts: { role: string; agent?: string; name?: string; json?: boolean; capabilities?: string[]; validators?: string[]; budgetUsd?: number; maxConcurrent?: number }) => {
      const { created, known } = await withDatabase(ctx, async (d) => {
        const c = await tokenCreate(d.db, {
          role: opts.role as TokenRole, agentId: opts.agent, name: opts.name,
          capabilities: opts.capabilities ?? (opts.role === 'agent' ? [] : undefined), validators: opts.validators, budgetUsd: opts.budgetUsd, maxConcurrent: opts.maxConcurrent,
        });
        return { created: c, known: opts.agent ? await tokenAgentKnown(d.db, opts.agent) : true };
      });
      const out = new Output(ctx.io, !!opts.json);
      out.result(created, () => {
        out.line(created.token);
        ctx.io.stderr(`token ${created.id} (${created.role}${created.agentId ? ` as ${created.agentId}` : ''}): shown once; send it as "Authorization: Bearer <token>"\n`);
        if (created.grant) ctx.io.stderr(`grant: ${grantText(created.grant)}\n`);
        if (!known) ctx.io.stderr(`note: agent ${created.agentId} is not registered yet; it can register itself with this token (POST /api/agents)\n`);
      });
    });
  tokens
    .command('list')
    .description('the tokens: id, role, agent, grant, name, created, last used, revoked (never the secret)')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      const rows = await withDatabase(ctx, (d) => tokenList(d.db));
      const out = new Output(ctx.io, !!opts.json);
      out.result(rows, () => out.table(['id', 'role', 'agent', 'grant', 'name', 'created', 'last used', 'revoked'],
        rows.map((t) => [t.id, t.role, t.agentId, t.grant ? grantText(t.grant) : null, t.name, ago(t.createdAt), ago(t.lastUsedAt), t.revokedAt ? ago(t.revokedAt) : null])));
    });
  tokens
    .command('revoke')
    .description('revoke a token: its next request is a 401')
    .argument('<id>')
    .action(async (id: string) => {
      await withDatabase(ctx, (d) => tokenRevoke(d.db, id));
      ctx.io.stdout(`revoked ${id}\n`);
    });

  program
    .command('openapi')
    .description('print the HTTP API\'s OpenAPI 3.1 document (generated from the routes\' zod schemas; also served at /openapi.json)')
    .action(async () => ctx.io.stdout(`${JSON.stringify(await openApiDocumentBuild(), null, 2)}\n`));

  const hooks = program.command('webhooks').description('POST a JSON event to URLs on dead letters (and DAG blocked/completed/cancelled if subscribed)');
  hooks
    .command('add')
    .description('add a webhook (loopback, link-local and metadata addresses are refused unless DAGENT_WEBHOOK_ALLOW_HOSTS allows the host)')
    .argument('<url>')
    .option('--events <types>', 'comma-separated: task.dead_lettered, task.waiting, dag.blocked, dag.completed, dag.cancelled (default task.dead_lettered)')
    .option('--secret <secret>', 'sign each body: Dagent-Signature: sha256=<HMAC>')
    .option('--json', 'machine-readable output')
    .action(async (url: string, opts: { events?: string; secret?: string; json?: boolean }) => {
      const events = opts.events?.split(',').map((e) => e.trim()).filter(Boolean);
      const row = await withDatabase(ctx, (d) => webhookAdd(d.db, { url, events, secret: opts.secret, allowHosts: configFromEnv(ctx.io.env).webhookAllowHosts }));
      const out = new Output(ctx.io, !!opts.json);
      const shown = { ...row, url: urlRedact(row.url), secret: row.secret ? '(set)' : null };
      out.result(shown, () => out.line(`${row.id} → ${shown.url} on ${row.events.join(', ')}`));
    });
  hooks
    .command('list')
    .description('the webhooks: id, URL, the events each receives, signed, enabled')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      const rows = await withDatabase(ctx, (d) => webhookList(d.db));
      const out = new Output(ctx.io, !!opts.json);
      out.result(rows, () => out.table(['id', 'url', 'events', 'signed', 'enabled'],
        rows.map((r) => [r.id, r.url, r.events.join(','), r.signed ? 'yes' : 'no', r.enabled ? 'yes' : 'no'])));
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

function list(v: string): string[] {
  return v.split(',').map((x) => x.trim()).filter(Boolean);
}

/** `capabilities shell, llm; validators validate:test; budget ≤ 5 USD` */
function grantText(g: Grant): string {
  const parts = [g.capabilities === null ? 'any capability but validators (made before grants)' : `capabilities ${g.capabilities.join(', ') || 'none'}`];
  if (g.validators.length) parts.push(`validators ${g.validators.map((v) => `${VALIDATOR_PREFIX}${v}`).join(', ')}`);
  if (g.budgetUsd !== null) parts.push(`budget ≤ ${g.budgetUsd} USD`);
  if (g.maxConcurrent !== null) parts.push(`≤ ${g.maxConcurrent} at once`);
  return parts.join('; ');
}
