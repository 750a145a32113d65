import type { Command } from 'commander';
import { ForbiddenError, InvalidInputError, UnauthorizedError } from '../errors.js';
import { accessAllows } from '../auth/access.js';
import { CLAIM_WAIT_DEFAULTS, configFromEnv } from '../config/index.js';
import { withDatabase, type CommandContext } from './context.js';

/** `dagent mcp --token T`: the MCP server over stdio, for a harness that launches it (stdout is the protocol's). */
export function mcpCommand(program: Command, ctx: CommandContext): void {
  program
    .command('mcp')
    .description('serve MCP over stdio, for an MCP-speaking agent harness: an agent token works tasks as its agent')
    .option('--token <token>', 'a dagent API token (default: DAGENT_TOKEN)')
    .action(async (opts: { token?: string }) => {
      const token = opts.token ?? ctx.io.env.DAGENT_TOKEN;
      if (!token) throw new InvalidInputError('--token (or DAGENT_TOKEN) is required: an agent token from dagent tokens create --role agent');
      const [{ StdioServerTransport }, { mcpSessionCreate }, { tokenVerify }, { packageVersion }, { ClaimWaiters }, { TokenRevocations }, { ReadyListener }, { READY_CHANNEL, REVOKED_CHANNEL }, { groupProbe }] = await Promise.all([
        import('@modelcontextprotocol/sdk/server/stdio.js'), import('../mcp/server.js'), import('../auth/tokens.js'), import('../package-root.js'),
        import('../claim-wait/waiters.js'), import('../auth/revocations.js'), import('../db/ready-listener.js'), import('../db/statement.js'),
        import('../claim-wait/claim-when-ready.js'),
      ]);
      const cfg = configFromEnv(ctx.io.env);
      await withDatabase(ctx, async (d) => {
        const principal = await tokenVerify(d.db, token);
        if (!principal) throw new UnauthorizedError('the token is unknown or revoked');
        if (!accessAllows('mcp', principal.role)) throw new ForbiddenError(`a ${principal.role} token has no MCP tools: use an agent, submit, read or admin token`);
        // next_task waits for work as every waiting claim does, and the token's revocation is heard, on a LISTEN connection of this process's own.
        const listener = new ReadyListener({ url: d.sessionUrl, log: ctx.log, channels: [READY_CHANNEL, REVOKED_CHANNEL] });
        await listener.start();
        const waiters = new ClaimWaiters({ databaseUrl: d.sessionUrl, log: ctx.log, listener, perAgent: CLAIM_WAIT_DEFAULTS.waitingPerAgent, max: CLAIM_WAIT_DEFAULTS.waitingMax, readyInGroup: groupProbe(d.db) });
        const revocations = new TokenRevocations({ db: d.db, databaseUrl: d.sessionUrl, log: ctx.log, listener });
        const session = mcpSessionCreate(d.db, principal, { log: ctx.log, version: packageVersion(), fileRoots: cfg.fileRoots, maxQueued: cfg.maxQueued, waiters });
        const transport = new StdioServerTransport();
        let revoked = false;
        const closed = new Promise<void>((resolve) => {
          transport.onclose = resolve;
          process.stdin.once('end', resolve);
          revocations.watch(principal.tokenId, () => { revoked = true; resolve(); });
        });
        await session.server.connect(transport);
        ctx.log.info({ agentId: principal.agentId, role: principal.role }, 'MCP server on stdio');
        await closed;
        // The harness went away: stop heartbeating; what the session held goes back through the reaper. A revoked
        // token's session hands what it holds back at once, and the server stops talking to the harness.
        await session.close({ release: revoked ? 'its token was revoked' : undefined });
        await transport.close().catch(() => {});
        await revocations.close();
        await waiters.close();
        await listener.stop();
        if (revoked) throw new UnauthorizedError(`token ${principal.tokenId} was revoked: the MCP session ended`);
      });
    });
}
