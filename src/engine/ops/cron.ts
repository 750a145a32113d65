import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { errorMessage } from '../../db/pg-errors.js';
import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { dagFindByIdempotencyKey, dagRunningIdsByCreator } from '../../db/queries/dags.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { DEFAULT_TENANT, tenantKnown } from '../../db/queries/tenants.js';
import {
  dbNow, scheduleAdvance, scheduleDelete, scheduleEnabledSet, scheduleGet, scheduleListAll,
  scheduleLock, scheduleLockDue, scheduleUpsert, type ScheduleKey, type ScheduleListRow, type ScheduleRow,
} from '../../db/queries/schedules.js';
import { cronDue, cronNextAfter, cronNextRuns, type DueFires } from '../../dag/cron.js';
import { dagSourceLoad } from '../../dag/load.js';
import type { DagSpec } from '../../dag/spec.js';
import { BackpressureError, ConflictError, DagValidationError, DagentError, ForbiddenError, InvalidInputError, NotFoundError, tenantUnknownError } from '../../errors.js';

export type { ScheduleKey };
import { dagCancel } from '../dag/cancel.js';
import { dagCreateInTx, queueFullFor } from '../dag/submit.js';

/** With catchup `none`, a fire this late is a missed fire, not a slightly late one. */
export const MISFIRE_GRACE_SEC = 5;
const DUE_PER_TICK = 50;

/** Where the scheduler reads the time: the database clock unless a test injects one. */
export type Clock = (db: Db) => Promise<Date>;

/**
 * Register (or update) the schedule a DAG file declares. Its source is kept and
 * loaded again at every fire with the schedule's params (and `scheduled_at`), so
 * that load is tried now: a file that cannot fire is refused at registration.
 * The next fire is computed from the database clock; an unchanged cron and
 * time zone keep their place.
 */
export async function scheduleRegister(db: Db, spec: DagSpec, source: string, clock: Clock = dbNow, author: ScheduleAuthor = OPERATOR): Promise<ScheduleRow> {
  const s = spec.schedule;
  if (!s) throw new InvalidInputError(`${spec.sourceFile ?? spec.name}: no schedule block`);
  return withTx(db, async (tx) => {
    const now = await clock(tx);
    if (author.tenant !== undefined && !(await tenantKnown(tx, author.tenant))) {
      throw tenantUnknownError(author.tenant);
    }
    await fireKeysCheck(spec, source, now);
    // Locked: a fire in progress commits first, and its advanced next_fire_at is what we keep. Names are per tenant:
    // another tenant's schedule of this name is another schedule, neither found nor replaced here.
    const tenant = author.tenant ?? DEFAULT_TENANT;
    const prior = await scheduleLock(tx, { tenant, name: s.name });
    if (prior && !author.replaceAny && prior.createdBy !== author.createdBy) {
      throw new ForbiddenError(`schedule ${s.name} was registered by ${prior.createdBy ?? 'an operator'}; only its author or an admin may replace it`, { schedule: s.name });
    }
    const keep = prior && prior.cron === s.cron && prior.timezone === s.timezone && prior.enabled;
    const nextFireAt = keep ? prior.nextFireAt : cronNextAfter(s.cron, s.timezone, now)!;
    const row = await scheduleUpsert(tx, {
      name: s.name, dagName: spec.name, sourceFile: spec.sourceFile ?? null, source, cron: s.cron, timezone: s.timezone,
      catchup: s.catchup, catchupLimit: s.catchupLimit, overlap: s.overlap, enabled: s.enabled, params: s.params, nextFireAt,
      createdBy: author.createdBy, tenantId: tenant,
    });
    await eventInsertMany(tx, [{ type: 'schedule.registered', data: { name: s.name, tenant, cron: s.cron, timezone: s.timezone, nextFireAt } }]);
    return row;
  });
}

/** Who registers a schedule, and whether they may replace one someone else registered (admins and the CLI may). */
export interface ScheduleAuthor {
  createdBy: string; replaceAny: boolean;
  /** The tenant the schedule is named in and its DAGs belong to (default the default tenant). */
  tenant?: string;
}
const OPERATOR: ScheduleAuthor = { createdBy: 'cli', replaceAny: true };

export interface FireReport { schedule: string; fired: Array<{ at: Date; dagId: string }>; skipped: Date[]; missed: number; next: Date }

/**
 * One scheduler tick: for each due schedule, in one transaction that holds its
 * row, decide which due instants fire (catchup), apply the overlap policy,
 * create each fire's DAG under the idempotency key `cron:<name>:<instant>`, and
 * advance next_fire_at past now. Any number of schedulers may run this at once:
 * a schedule is handled by whoever locks it, and a fire has one possible DAG.
 */
export async function scheduleFireDue(db: Db, opts: { clock?: Clock; log?: Logger; limit?: number; maxQueued?: number } = {}): Promise<FireReport[]> {
  const clock = opts.clock ?? dbNow;
  const reports: FireReport[] = [];
  for (;;) {
    let failed: { name: string; error: unknown } | undefined;
    const report = await withTx(db, async (tx) => {
      const now = await clock(tx);
      const [row] = await scheduleLockDue(tx, now, 1);
      if (!row) return undefined;
      try {
        // A savepoint: a fire that fails is undone; one that would fail again is moved on below, so it cannot hold up the others.
        return await withTx(tx, (inner) => scheduleFire(inner, row, now, opts.log, opts.maxQueued));
      } catch (error) {
        if (!firePermanentlyFails(error)) throw error; // a deadlock, a lost connection: the next tick tries again
        failed = { name: row.name, error };
        return scheduleFireFailed(tx, row, now, error, opts.log);
      }
    });
    if (!report) return reports;
    if (failed) opts.log?.error({ schedule: failed.name, err: errorMessage(failed.error) }, 'schedule fire failed; skipped to the next fire');
    reports.push(report);
    if (reports.length >= (opts.limit ?? DUE_PER_TICK)) return reports;
  }
}

async function scheduleFire(tx: Db, row: ScheduleRow, now: Date, log?: Logger, maxQueued?: number): Promise<FireReport> {
  const due = cronDue(row.cron, row.timezone, row.nextFireAt, now, Math.max(1, row.catchupLimit));
  const toFire = catchupPick(row, due, now);
  const next = cronNextAfter(row.cron, row.timezone, now)!;
  const report: FireReport = { schedule: row.name, fired: [], skipped: [], missed: due.count - toFire.length, next };
  const skipReasons: string[] = [];
  for (const at of toFire) {
    const key = `cron:${row.name}:${at.toISOString()}`;
    // Already fired (a tick that ran before, or a registration that raced one): nothing to do, nothing to count.
    if (await dagFindByIdempotencyKey(tx, row.tenantId, key)) continue;
    const running = await dagRunningIdsByCreator(tx, row.tenantId, `cron:${row.name}`);
    if (running.length && row.overlap === 'skip') {
      report.skipped.push(at);
      skipReasons.push('previous run still going (overlap: skip)');
      continue;
    }
    // The backpressure a submit obeys: a schedule is not a way around a full queue.
    const queued = maxQueued === undefined ? undefined : await queueFullFor(tx, maxQueued, row.tenantId);
    if (queued !== undefined) {
      report.skipped.push(at);
      skipReasons.push(`queue full (${queued} ready or pending tasks, limit ${maxQueued})`);
      continue;
    }
    if (row.overlap === 'cancel_previous') {
      for (const id of running) await dagCancelIfOpen(tx, id, `cron:${row.name}`, `superseded by the fire at ${at.toISOString()}`);
    }
    const spec = await dagFireLoad(row, at);
    let created;
    try {
      created = await dagCreateInTx(tx, { ...spec, idempotencyKey: key }, { createdBy: `cron:${row.name}`, scheduledAt: at, tenant: row.tenantId });
    } catch (e) {
      // Its tenant at its queued quota (refused before anything is written): skipped like a full queue. Thrown, it
      // would fail the tick, and this schedule, due first again at every tick, would hold up every one behind it.
      if (!(e instanceof BackpressureError)) throw e;
      report.skipped.push(at);
      skipReasons.push(e.message);
      continue;
    }
    report.fired.push({ at, dagId: created.dagId });
  }
  await scheduleAdvance(tx, keyOf(row), {
    nextFireAt: report.next,
    lastFireAt: report.fired.at(-1)?.at,
    lastDagId: report.fired.at(-1)?.dagId,
    fired: report.fired.length, skipped: report.skipped.length, missed: report.missed,
  });
  await eventInsertMany(tx, [
    ...report.fired.map((f) => ({ type: 'schedule.fired', dagId: f.dagId, data: { name: row.name, tenant: row.tenantId, at: f.at } })),
    ...report.skipped.map((at, i) => ({ type: 'schedule.skipped', data: { name: row.name, tenant: row.tenantId, at, reason: skipReasons[i] } })),
    ...(report.missed ? [{ type: 'schedule.missed', data: { name: row.name, tenant: row.tenantId, count: report.missed, atLeast: due.atLeast, catchup: row.catchup } }] : []),
  ]);
  log?.info({ schedule: row.name, tenant: row.tenantId, fired: report.fired.length, skipped: report.skipped.length, missed: report.missed, next: report.next }, 'schedule fired');
  return report;
}

/** A fire that could not create its DAG: count its due instants as missed, record why, and move on to the next fire. */
async function scheduleFireFailed(tx: Db, row: ScheduleRow, now: Date, error: unknown, log?: Logger): Promise<FireReport> {
  const due = cronDue(row.cron, row.timezone, row.nextFireAt, now, 1);
  const next = cronNextAfter(row.cron, row.timezone, now)!;
  const missed = Math.max(1, due.count);
  await scheduleAdvance(tx, keyOf(row), { nextFireAt: next, missed });
  await eventInsertMany(tx, [{ type: 'schedule.fire_failed', data: { name: row.name, tenant: row.tenantId, error: errorMessage(error), due: due.count } }]);
  log?.debug({ schedule: row.name }, 'fire failure recorded');
  return { schedule: row.name, fired: [], skipped: [], missed, next };
}

/** Errors a later tick would hit again (the DAG cannot be built or inserted); anything else is retried. */
function firePermanentlyFails(e: unknown): boolean {
  const code = (e as { cause?: { code?: string }; code?: string })?.cause?.code ?? (e as { code?: string })?.code;
  return e instanceof DagValidationError || e instanceof InvalidInputError || e instanceof ConflictError || code === '23505' || code === '23514';
}

/** Cancel a previous run unless it finished meanwhile (it raced to completion: nothing to supersede). */
async function dagCancelIfOpen(tx: Db, dagId: string, by: string, note: string): Promise<void> {
  try {
    await withTx(tx, (inner) => dagCancel(inner, dagId, by, note));
  } catch (e) {
    if (!(e instanceof DagentError && e.code === 'ILLEGAL_TRANSITION')) throw e;
  }
}

/**
 * A task idempotency key is unique across all DAGs: one that is the same at
 * every fire would make every fire after the first fail. Tried with two instants.
 */
async function fireKeysCheck(spec: DagSpec, source: string, now: Date): Promise<void> {
  const s = spec.schedule!;
  const load = (at: Date) => dagFireLoad({ source, sourceFile: spec.sourceFile ?? null, params: s.params, name: s.name }, at);
  const a = await load(now);
  const b = await load(new Date(now.getTime() + 60_000));
  for (const t of a.tasks) {
    if (t.idempotencyKey && t.idempotencyKey === b.tasks.find((x) => x.key === t.key)?.idempotencyKey) {
      throw new InvalidInputError(`${spec.sourceFile ?? spec.name}: task ${t.key} has the same idempotency_key at every fire, so every fire after the first would fail; include \${params.scheduled_at} in it`);
    }
  }
}

/** Which due instants fire: catchup none fires only an on-time instant, latest the newest, all the newest catchup_limit. */
export function catchupPick(row: Pick<ScheduleRow, 'catchup' | 'catchupLimit'>, due: DueFires, now: Date): Date[] {
  if (due.newest.length === 0) return [];
  const newest = due.newest[due.newest.length - 1]!;
  if (row.catchup === 'all') return due.newest.slice(-row.catchupLimit);
  if (row.catchup === 'latest') return [newest];
  return now.getTime() - newest.getTime() <= MISFIRE_GRACE_SEC * 1000 ? [newest] : [];
}

/** The DAG a fire creates: the stored source with the schedule's params, and `scheduled_at` if the DAG declares it. */
async function dagFireLoad(s: Pick<ScheduleRow, 'source' | 'sourceFile' | 'params' | 'name'>, at: Date): Promise<DagSpec> {
  const params = Object.fromEntries(Object.entries(s.params as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
  // Relative paths in the file (a template's `use`, a schema_file) start where the file was, as when it was submitted.
  const baseDir = s.sourceFile && existsSync(s.sourceFile) ? path.dirname(path.resolve(s.sourceFile)) : undefined;
  return dagSourceLoad(s.source, s.sourceFile ?? `schedule ${s.name}`, { params: { ...params, scheduled_at: at.toISOString() }, ignoreUndeclaredParams: true, baseDir });
}

/** A schedule's key: its tenant and name. */
function keyOf(row: Pick<ScheduleRow, 'tenantId' | 'name'>): ScheduleKey {
  return { tenant: row.tenantId, name: row.name };
}

/** A schedule as people read it: its name and, outside the default tenant, its tenant. */
export function scheduleLabel(key: ScheduleKey): string {
  return key.tenant === DEFAULT_TENANT ? key.name : `${key.name} (tenant ${key.tenant})`;
}

function scheduleNotFound(key: ScheduleKey): NotFoundError {
  return new NotFoundError('schedule', scheduleLabel(key));
}

/** Fire now, by hand: a DAG with `created_by: cron:<name>`, whatever the overlap policy; the schedule's timing is unchanged. */
export async function scheduleTrigger(db: Db, key: ScheduleKey, clock: Clock = dbNow): Promise<{ dagId: string; at: Date }> {
  return withTx(db, async (tx) => {
    const row = await scheduleLock(tx, key);
    if (!row) throw scheduleNotFound(key);
    const at = await clock(tx);
    const spec = await dagFireLoad(row, at);
    const created = await dagCreateInTx(tx, { ...spec, idempotencyKey: `cron:${row.name}:manual:${at.toISOString()}` }, { createdBy: `cron:${row.name}`, scheduledAt: at, tenant: row.tenantId });
    await scheduleAdvance(tx, key, { nextFireAt: row.nextFireAt, lastFireAt: at, lastDagId: created.dagId, fired: 1 });
    await eventInsertMany(tx, [{ type: 'schedule.fired', dagId: created.dagId, data: { name: row.name, tenant: row.tenantId, at, manual: true } }]);
    return { dagId: created.dagId, at };
  });
}

export async function schedulePause(db: Db, key: ScheduleKey): Promise<void> {
  if (!(await scheduleEnabledSet(db, key, false))) throw scheduleNotFound(key);
}

/** Resume from now on: fires that fell in the pause are not caught up (pausing means "do not run"). */
export async function scheduleResume(db: Db, key: ScheduleKey, clock: Clock = dbNow): Promise<ScheduleRow> {
  return withTx(db, async (tx) => {
    const row = await scheduleLock(tx, key);
    if (!row) throw scheduleNotFound(key);
    if (row.enabled) return row; // not paused: its due fires stay due
    const next = cronNextAfter(row.cron, row.timezone, await clock(tx))!;
    await scheduleEnabledSet(tx, key, true, next);
    return { ...row, enabled: true, nextFireAt: next };
  });
}

export async function scheduleRemove(db: Db, key: ScheduleKey): Promise<void> {
  if (!(await scheduleDelete(db, key))) throw scheduleNotFound(key);
}

/** The next `count` fire instants from now (database clock). */
export async function scheduleNext(db: Db, key: ScheduleKey, count: number, clock: Clock = dbNow): Promise<Date[]> {
  const row = await scheduleGet(db, key);
  if (!row) throw scheduleNotFound(key);
  return cronNextRuns(row.cron, row.timezone, await clock(db), count);
}

export function scheduleList(db: Db): Promise<ScheduleListRow[]> {
  return scheduleListAll(db);
}
