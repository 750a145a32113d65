import type { Db } from '../connection.js';
import { capabilityGroups } from '../schema/index.js';

/** The group key of a set of required capabilities (already deduplicated and sorted at submission). */
export function capKeyOf(capabilities: readonly string[]): string {
  return [...capabilities].sort().join(',');
}

/** Record the capability groups of tasks about to be inserted (new groups only; existing ones are left alone). */
export async function capabilityGroupsEnsure(db: Db, sets: ReadonlyArray<readonly string[]>): Promise<void> {
  const byKey = new Map(sets.map((c) => [capKeyOf(c), [...c].sort()]));
  if (byKey.size === 0) return;
  await db.insert(capabilityGroups).values([...byKey].map(([capKey, capabilities]) => ({ capKey, capabilities })))
    .onConflictDoNothing();
}
