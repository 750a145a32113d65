/** The spend limits an attempt is held to while it runs (usage.ts), named once for the engine, the wire and the refusals. */

/**
 * The limits an attempt is held to on every report, in the order they are checked (the first one passed stops it):
 * per attempt, then the DAG's, then the agent's and its token's grant. Each in USD but task.max_tokens.
 */
export const USAGE_LIMITS = [
  'task.max_cost_usd', 'task.max_tokens', 'dag.budget_usd', 'dag.daily_budget_usd',
  'agent.budget_usd', 'agent.daily_budget_usd', 'token.grant_budget_usd',
] as const;
export type UsageLimitName = (typeof USAGE_LIMITS)[number];

/** A limit holding an attempt: which, how much, and what is spent against it (tokens for task.max_tokens, else USD). */
export type LimitReached =
  | { limit: Exclude<UsageLimitName, 'task.max_tokens'>; limitUsd: number; spentUsd: number }
  | { limit: 'task.max_tokens'; limitTokens: number; spentTokens: number };

/** `dag.budget_usd 5 reached: 5.2 USD spent`, `task.max_tokens 1000 reached: 1200 tokens spent`. */
export function limitText(l: LimitReached): string {
  const trim = (n: number) => n.toFixed(6).replace(/\.?0+$/, '');
  return 'limitTokens' in l ? `${l.limit} ${l.limitTokens} reached: ${l.spentTokens} tokens spent` : `${l.limit} ${l.limitUsd} reached: ${trim(l.spentUsd)} USD spent`;
}
