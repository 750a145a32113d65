// The READY notification's payload, as its readers parse it: no SQL here, so the published declarations of what
// reads it (the agent runtime's options) never load drizzle's. db/queries/ready-hint.ts writes it.

/**
 * The payload of a READY notification: how many tasks of one claim group of one tenant became READY, and the
 * group (`<count>/<µs>/<tenant> <cap_key>`), so a node's waiting claims wake only agents that can take them
 * (claim-wait/waiters.ts). A payload without a group (an empty one, or one whose key would not fit
 * in a NOTIFY) means "something became READY": everyone wakes. Decided in docs/architecture.md#notify.
 */
export interface ReadyHint {
  count: number;
  /** Null: any group. `tenant`: whose work it is (null: a payload that names none, any tenant's). */
  group: { key: string; capabilities: string[]; models: string[]; tenant: string | null } | null;
}

/** The hint a payload carries; null for one that names nothing (wake everyone). */
export function readyHintParse(payload: string): ReadyHint | null {
  const m = /^(\d+)(?:\/\d+)?(?:\/([a-z0-9_-]+))?(?: (.*))?$/s.exec(payload);
  if (!m) return null;
  const count = Number(m[1]);
  if (m[3] === undefined) return { count, group: null };
  const [caps, models] = m[3].split(' models=');
  return { count, group: { key: m[3], capabilities: caps ? caps.split(',') : [], models: models ? models.split(',') : [], tenant: m[2] ?? null } };
}
