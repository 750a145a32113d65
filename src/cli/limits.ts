import type { Command } from 'commander';
import { withDatabase, type CommandContext } from './context.js';
import { Output } from './output.js';

/** `dagent limits …`: rate limits declared for models and providers (docs/priority.md#declared-rate-limits). */
export function limitsCommands(program: Command, ctx: CommandContext): void {
  const limits = program.command('limits').description('rate limits per model or provider, shared by the fleet: requests and tokens per window');
  const json = (c: Command) => c.option('--json', 'machine-readable output');

  json(limits.command('list').description('the declared limits, what their current window holds, and the models or providers a 429 paused'))
    .action(async (opts: { json?: boolean }) => {
      const { rateLimitList } = await import('../engine/ops/rate-limits.js');
      const { modelPauseList } = await import('../db/queries/model-pauses.js');
      const [rows, pauses] = await withDatabase(ctx, async (d) => [await rateLimitList(d.db), (await modelPauseList(d.db)).filter((p) => p.remainingSec > 0)] as const);
      const out = new Output(ctx.io, !!opts.json);
      out.result({ rateLimits: rows, paused: pauses }, () => {
        if (rows.length === 0) out.line('no rate limit is declared');
        else {
          out.table(['key', 'requests', 'tokens', 'window', 'default tokens', 'requests now', 'tokens now'],
            rows.map((r) => [r.key, r.requests, r.tokens, `${r.windowSec}s`, r.defaultTokens, r.requestsUsed, r.tokensUsed]));
        }
        for (const p of pauses) out.line(`paused after a 429: ${p.model} for ${Math.ceil(p.remainingSec)}s more (${p.reason ?? 'no message'})`);
      });
    });

  json(limits.command('set').description('declare or change the limit of a model (openai/gpt-4o) or a provider (openai: all its models)')
    .argument('<key>', 'a model name, or a provider (the part before the first /)')
    .option('--requests <n>', 'attempts claimed per window (500, 1.5k)')
    .option('--tokens <n>', 'tokens reserved or used per window (300k)')
    .option('--per <duration>', 'the window: 1m (the default), 10s, 1h')
    .option('--default-tokens <n>', 'what a task without estimated_tokens reserves (default 0)'))
    .action(async (key: string, opts: { requests?: string; tokens?: string; per?: string; defaultTokens?: string; json?: boolean }) => {
      const { rateLimitSet } = await import('../engine/ops/rate-limits.js');
      const body = {
        ...(opts.requests !== undefined ? { requests: opts.requests } : {}),
        ...(opts.tokens !== undefined ? { tokens: opts.tokens } : {}),
        ...(opts.per !== undefined ? { per: opts.per } : {}),
        ...(opts.defaultTokens !== undefined ? { default_tokens: opts.defaultTokens } : {}),
      };
      const row = await withDatabase(ctx, (d) => rateLimitSet(d.db, key, body, { log: ctx.log }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(row, () => out.line(`${row.key}: ${[row.requests !== null ? `${row.requests} requests` : '', row.tokens !== null ? `${row.tokens} tokens` : ''].filter(Boolean).join(', ')} per ${row.windowSec}s`));
    });

  json(limits.command('rm').description('remove a declared limit').argument('<key>'))
    .action(async (key: string, opts: { json?: boolean }) => {
      const { rateLimitRemove } = await import('../engine/ops/rate-limits.js');
      await withDatabase(ctx, (d) => rateLimitRemove(d.db, key, { log: ctx.log }));
      const out = new Output(ctx.io, !!opts.json);
      out.result({ key, removed: true }, () => out.line(`removed the limit of ${key}`));
    });

  json(limits.command('apply').description('declare every limit of a YAML file (rate_limits: {KEY: {requests, tokens, per, default_tokens}}) in one transaction')
    .argument('<file>', 'the limits file')
    .option('--prune', 'also remove the limits the file does not name (the file is the whole configuration)'))
    .action(async (file: string, opts: { prune?: boolean; json?: boolean }) => {
      const { rateLimitsApply, rateLimitsFileRead } = await import('../engine/ops/rate-limits.js');
      const limits = rateLimitsFileRead(file);
      const r = await withDatabase(ctx, (d) => rateLimitsApply(d.db, limits, { prune: opts.prune, log: ctx.log }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(r, () => out.line(`${r.set.length} limit(s) declared${r.removed.length ? `, removed ${r.removed.join(', ')}` : ''}`));
    });
}
