import { readFileSync } from 'node:fs';
import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import type { DagSpec } from '../../dag/spec.js';
import { dbNow } from '../../db/queries/schedules.js';
import { DEFAULT_TENANT } from '../../db/queries/tenants.js';
import { InvalidInputError } from '../../errors.js';
import { judgeGapsFind, judgeGapText } from '../dag/judge-check.js';
import { scheduleRegister } from './cron.js';
import { dagSubmit, type SubmitOptions, type SubmitResult } from '../dag/submit.js';

/** `warnings`: what `force` let through (llm-judge steps no active judge can serve now). */
export type IntakeResult = (SubmitResult | { schedule: string; nextFireAt: Date }) & { warnings?: string[] };

/**
 * Submit loaded DAG specs in one transaction (the CLI's `submit`, the HTTP API's
 * POST /api/dags): specs with a `schedule:` block register their schedule (the
 * DAG then runs at each fire), the others are created now. `sourceOf` gives a
 * scheduled spec's YAML text (default: its file). A schedule registered by
 * someone else is replaced only when `replaceAnySchedule` (admins, the CLI).
 * A DAG with an llm-judge step that no active judge agent can serve is refused, unless `force`:
 * then it is accepted and each result carries the warnings (judge-check.ts).
 */
export async function dagSubmitOrSchedule(
  db: Db, specs: DagSpec[], opts: SubmitOptions & { sourceOf?: (spec: DagSpec) => string; replaceAnySchedule?: boolean; force?: boolean } = {},
): Promise<IntakeResult[]> {
  const gaps = await judgeGapsFind(db, specs, opts.tenant ?? DEFAULT_TENANT);
  if (gaps.length && !opts.force) {
    throw new InvalidInputError(`${gaps.map(judgeGapText).join('; ')}; nothing was submitted (--force, or ?force=true over HTTP, submits anyway)`, { gaps });
  }
  const results = await intake(db, specs, opts);
  if (gaps.length === 0) return results;
  opts.log?.warn({ gaps }, 'submitted with llm-judge steps no active judge can serve (force)');
  return results.map((r, i) => {
    const mine = gaps.filter((g) => g.dag === specs[i]!.name).map(judgeGapText);
    return mine.length ? { ...r, warnings: mine } : r;
  });
}

async function intake(
  db: Db, specs: DagSpec[], opts: SubmitOptions & { sourceOf?: (spec: DagSpec) => string; replaceAnySchedule?: boolean },
): Promise<IntakeResult[]> {
  const author = { createdBy: opts.createdBy ?? 'api', replaceAny: opts.replaceAnySchedule ?? false, tenant: opts.tenant };
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
