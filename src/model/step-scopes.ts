/**
 * A durable step's scope: `task` steps are recorded once per task and replayed in every later attempt; `attempt`
 * steps run fresh in each attempt (recorded with it, for the record). Kept apart from the table's schema module so
 * the public API's declarations name no drizzle type.
 */
export const STEP_SCOPES = ['task', 'attempt'] as const;
export type StepScope = (typeof STEP_SCOPES)[number];
