// The READY notification's payload, as its readers parse it: no SQL here, so the published declarations of what
// reads it (the agent runtime's options) never load drizzle's. db/queries/ready-hint.ts writes it.

/**
 * The payload of a READY notification: how many tasks of one claim group became READY, and the
 * group (`<count>/<µs> <cap_key>`), so a node's waiting claims wake only agents that can take them
 * (claim-wait/waiters.ts). A payload without a group (an empty one, or one whose key would not fit
 * in a NOTIFY) means "something became READY": everyone wakes. Decided in docs/architecture.md#notify.
 */
export interface ReadyHint {
  count: number;
  /** Null: any group. */
  group: { key: string; capabilities: string[]; models: string[] } | null;
}

/** The hint a payload carries; null for one that names nothing (wake everyone). */
export function readyHintParse(payload: string): ReadyHint | null {
  const m = /^(\d+)(?:\/\d+)?(?: (.*))?$/s.exec(payload);
  if (!m) return null;
  const count = Number(m[1]);
  if (m[2] === undefined) return { count, group: null };
  const [caps, models] = m[2].split(' models=');
  return { count, group: { key: m[2], capabilities: caps ? caps.split(',') : [], models: models ? models.split(',') : [] } };
}
