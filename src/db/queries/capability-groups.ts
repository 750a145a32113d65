import type { Db } from '../handle.js';
import { capabilityGroups } from '../schema/index.js';

/**
 * A task's claim group: its required capabilities and the models it accepts. The key is the
 * capabilities (sorted, comma-joined; '' for none), then ` models=` and the models (sorted, comma-joined)
 * when it names any. Neither a capability nor a model name holds a space or a comma, so keys never collide.
 */
export interface ClaimGroup { capabilities: readonly string[]; models: readonly string[] }

export function claimGroupKey(g: ClaimGroup): string {
  const caps = [...new Set(g.capabilities)].sort().join(',');
  return g.models.length === 0 ? caps : `${caps} models=${[...new Set(g.models)].sort().join(',')}`;
}

/** The models a task accepts: its preferred and its fallback models, sorted and distinct (what tasks.models holds). */
export function modelsAccepted(body: { models: readonly string[]; fallbackModels: readonly string[] }): string[] {
  return [...new Set([...body.models, ...body.fallbackModels])].sort();
}

/** Record the claim groups of tasks about to be inserted, per tenant (new ones only; existing ones are left alone). */
export async function capabilityGroupsEnsure(db: Db, groups: ReadonlyArray<ClaimGroup & { tenant: string }>): Promise<void> {
  const byKey = new Map(groups.map((g) => [`${claimGroupKey(g)}\u0000${g.tenant}`, {
    capKey: claimGroupKey(g), tenantId: g.tenant, capabilities: [...new Set(g.capabilities)].sort(), models: [...new Set(g.models)].sort(),
  }]));
  if (byKey.size === 0) return;
  await db.insert(capabilityGroups).values([...byKey.values()]).onConflictDoNothing();
}
