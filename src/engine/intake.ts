import { readFileSync } from 'node:fs';
import { withTx, type Db } from '../db/connection.js';
import type { DagSpec } from '../dag/spec.js';
import { dbNow } from '../db/queries/schedules.js';
import { scheduleRegister } from './schedules.js';
import { dagSubmit, type SubmitOptions, type SubmitResult } from './submit.js';

export type IntakeResult = SubmitResult | { schedule: string; nextFireAt: Date };

/**
 * Submit loaded DAG specs in one transaction (the CLI's `submit`, the HTTP API's
 * POST /api/dags): specs with a `schedule:` block register their schedule (the
 * DAG then runs at each fire), the others are created now. `sourceOf` gives a
 * scheduled spec's YAML text (default: its file). A schedule registered by
 * someone else is replaced only when `replaceAnySchedule` (admins, the CLI).
 */
export async function dagSubmitOrSchedule(
  db: Db, specs: DagSpec[], opts: SubmitOptions & { sourceOf?: (spec: DagSpec) => string; replaceAnySchedule?: boolean } = {},
): Promise<IntakeResult[]> {
  const author = { createdBy: opts.createdBy ?? 'api', replaceAny: opts.replaceAnySchedule ?? false };
  const sourceOf = opts.sourceOf ?? ((spec: DagSpec) => readFileSync(spec.sourceFile!, 'utf8'));
  // Nothing scheduled: dagSubmit's own transaction is the one (no savepoint inside an outer one).
  if (!specs.some((sp) => sp.schedule)) return dagSubmit(db, specs, opts);
  return withTx(db, async (tx) => {
    const now = specs.filter((sp) => !sp.schedule);
    const created = now.length ? await dagSubmit(tx, now, opts) : [];
    const out: IntakeResult[] = [];
    for (const spec of specs) {
      if (!spec.schedule) out.push(created[now.indexOf(spec)]!);
      else {
        const row = await scheduleRegister(tx, spec, sourceOf(spec), dbNow, author);
        out.push({ schedule: row.name, nextFireAt: row.nextFireAt });
      }
    }
    return out;
  });
}
