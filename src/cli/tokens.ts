import type { Command } from 'commander';
import { tokenAgentKnown, tokenCreate, tokenList, tokenRevoke, VALIDATOR_PREFIX, type Grant, type TokenRole } from '../auth/tokens.js';
import { withDatabase, type CommandContext } from './context.js';
import { Output, ago } from './output.js';

/** `dagent tokens …`: the HTTP API's bearer tokens. */
export function tokenCommands(program: Command, ctx: CommandContext): void {
  const tokens = program.command('tokens').description('bearer tokens for the HTTP API (stored hashed; the secret is shown once)');
  tokens
    .command('create')
    .description('create a token: admin (everything), submit (submit DAGs and read), read (read only) or agent (one agent, within a grant)')
    .requiredOption('--role <role>', 'admin, submit, read, signal or agent')
    .option('--agent <id>', 'agent tokens: the agent it acts as')
    .option('--capabilities <list>', 'agent tokens: comma-separated capabilities it may register (default none)', list)
    .option('--validators <list>', 'agent tokens: validator capabilities it may register, by name (test, judge: validate:test, validate:judge)', list)
    .option('--models <list>', 'agent tokens: comma-separated models it may register, or * for any (default none: it works tasks that name no model)', list)
    .option('--budget-usd <n>', 'agent tokens: most budget it may register', Number)
    .option('--max-concurrent <n>', 'agent tokens: most tasks at once it may register', Number)
    .option('--tenants <list>', 'comma-separated tenants it reads and acts on (an agent token: those its agent may serve); default every tenant', list)
    .option('--name <text>', 'a label to recognise the token by')
    .option('--json', 'machine-readable output')
    .action(async (opts: { role: string; agent?: string; name?: string; json?: boolean; capabilities?: string[]; validators?: string[]; models?: string[]; budgetUsd?: number; maxConcurrent?: number; tenants?: string[] }) => {
      const { created, known } = await withDatabase(ctx, async (d) => {
        const c = await tokenCreate(d.db, {
          role: opts.role as TokenRole, agentId: opts.agent, name: opts.name,
          capabilities: opts.capabilities ?? (opts.role === 'agent' ? [] : undefined), validators: opts.validators, models: opts.models ?? (opts.role === 'agent' ? [] : undefined), budgetUsd: opts.budgetUsd, maxConcurrent: opts.maxConcurrent, tenants: opts.tenants,
        });
        return { created: c, known: opts.agent ? await tokenAgentKnown(d.db, opts.agent) : true };
      });
      const out = new Output(ctx.io, !!opts.json);
      out.result(created, () => {
        out.line(created.token);
        ctx.io.stderr(`token ${created.id} (${created.role}${created.agentId ? ` as ${created.agentId}` : ''}): shown once; send it as "Authorization: Bearer <token>"\n`);
        if (created.grant) ctx.io.stderr(`grant: ${grantText(created.grant)}\n`);
        if (created.tenants) ctx.io.stderr(`tenants: ${created.tenants.join(', ')} (no other tenant's work exists for it)\n`);
        if (!known) ctx.io.stderr(`note: agent ${created.agentId} is not registered yet; it can register itself with this token (POST /api/agents)\n`);
      });
    });
  tokens
    .command('list')
    .description('the tokens: id, role, agent, tenants, grant, name, created, last used, revoked (never the secret)')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      const rows = await withDatabase(ctx, (d) => tokenList(d.db));
      const out = new Output(ctx.io, !!opts.json);
      out.result(rows, () => out.table(['id', 'role', 'agent', 'tenants', 'grant', 'name', 'created', 'last used', 'revoked'],
        rows.map((t) => [t.id, t.role, t.agentId, t.tenants?.join(',') ?? 'every', t.grant ? grantText(t.grant) : null, t.name, ago(t.createdAt), ago(t.lastUsedAt), t.revokedAt ? ago(t.revokedAt) : null])));
    });
  tokens
    .command('revoke')
    .description('revoke a token: its next request is a 401')
    .argument('<id>')
    .action(async (id: string) => {
      await withDatabase(ctx, (d) => tokenRevoke(d.db, id));
      ctx.io.stdout(`revoked ${id}\n`);
    });
}


function list(v: string): string[] {
  return v.split(',').map((x) => x.trim()).filter(Boolean);
}

/** `capabilities shell, llm; validators validate:test; budget ≤ 5 USD` */
function grantText(g: Grant): string {
  const parts = [g.capabilities === null ? 'any capability but validators (made before grants)' : `capabilities ${g.capabilities.join(', ') || 'none'}`];
  if (g.validators.length) parts.push(`validators ${g.validators.map((v) => `${VALIDATOR_PREFIX}${v}`).join(', ')}`);
  parts.push(g.models === null ? 'any model (made before models were granted)' : `models ${g.models.join(', ') || 'none'}`);
  if (g.budgetUsd !== null) parts.push(`budget ≤ ${g.budgetUsd} USD`);
  if (g.maxConcurrent !== null) parts.push(`≤ ${g.maxConcurrent} at once`);
  return parts.join('; ');
}
