import type { Logger } from 'pino';
import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { signalRecord, taskWaitingExpired, taskWaitingLockForKey, taskWaitingSignalled, type WaitingTask } from '../../db/queries/signals.js';
import { DEFAULT_TENANT, tenantKnown } from '../../db/queries/tenants.js';
import { SIGNAL_KEY_PATTERN } from '../../dag/file-schema.js';
import { InvalidInputError, tenantUnknownError } from '../../errors.js';
import { completionInput, completionWrite, outputProblem } from '../attempt/completion-write.js';
import { taskFail } from '../attempt/fail.js';

/**
 * Signals: an external event (a CI run, a deploy, a person elsewhere) sent to a key. Every task WAITING
 * on the key completes with the signal's payload as its output, in the signal's transaction; the signal
 * is kept as the key's latest, so a task that begins waiting later (created before it came) completes with
 * it too (signalWaitsSettle, run by the waits loop).
 */

export interface SignalResult {
  key: string;
  /** The tasks the signal completed now. */
  completed: Array<{ id: string; dagId: string; key: string }>;
  /** When it was recorded, by the database clock; a task waiting on the key later completes with it if created before. */
  receivedAt: Date;
}

/**
 * Send a signal: record it and complete every task of the tenant (default the default tenant) waiting on `key`
 * with `payload` as its output. Keys are per tenant: another tenant's task waiting on the same key is not reached.
 */
export async function signalSend(db: Db, key: string, payload: unknown, opts: { by?: string; log?: Logger; tenant?: string } = {}): Promise<SignalResult> {
  if (!SIGNAL_KEY_PATTERN.test(key)) {
    throw new InvalidInputError(`signal key ${JSON.stringify(key.slice(0, 210))}: 1–200 letters, digits and _ . : @ = + -, starting with a letter or digit`);
  }
  const bad = outputProblem(payload ?? null);
  if (bad) throw new InvalidInputError(`signal ${key}: the payload becomes the tasks' output, and ${bad.replace(/^output/, 'payload')}`);
  const by = opts.by ?? 'api';
  const tenant = opts.tenant ?? DEFAULT_TENANT;
  const r = await withTx(db, async (tx) => {
    if (!(await tenantKnown(tx, tenant))) throw tenantUnknownError(tenant);
    const { receivedAt } = await signalRecord(tx, tenant, key, payload, by);
    const waiting = await taskWaitingLockForKey(tx, tenant, key);
    await waitsComplete(tx, waiting.map((t) => ({ ...t, payload })), by);
    return { key, completed: waiting.map((t) => ({ id: t.id, dagId: t.dagId, key: t.key })), receivedAt };
  });
  opts.log?.info({ signal: key, completed: r.completed.map((t) => t.id), by }, 'signal received');
  return r;
}

/** Complete WAITING tasks with their signal's payload (their fence guards the statement), and say so in their DAGs' events. */
async function waitsComplete(tx: Db, waiting: Array<WaitingTask & { payload: unknown }>, by: string): Promise<void> {
  if (waiting.length === 0) return;
  await completionWrite(tx, waiting.map((t) => completionInput({ taskId: t.id, fence: t.fence, output: t.payload ?? null }, { signal: t.waitKey, by })));
  await eventInsertMany(tx, waiting.map((t) => ({ type: 'task.signalled', dagId: t.dagId, taskId: t.id, data: { signal: t.waitKey, by } })));
}

/**
 * What the waits loop does each pass: complete WAITING tasks whose signal came before they began
 * waiting, and fail (class timeout, through the retry policy) those whose wait ran out. Returns how many it settled.
 */
export async function signalWaitsSettle(db: Db, opts: { batch: number; log?: Logger }): Promise<number> {
  const early = await withTx(db, async (tx) => {
    const due = await taskWaitingSignalled(tx, opts.batch);
    await waitsComplete(tx, due, 'waits');
    return due.length;
  });
  let expired = 0;
  for (const t of await taskWaitingExpired(db, opts.batch, 'signal')) {
    const timeout = t.waitTimeoutSec === null ? '' : ` within ${t.waitTimeoutSec}s`;
    // reapCondition re-checks the lapse in the statement: a signal that completed it meanwhile wins.
    await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'timeout', message: `no signal ${t.waitKey}${timeout}` }, { log: opts.log, reapCondition: 'lease_expired' })
      .then(() => { expired++; }, (e: unknown) => opts.log?.debug({ taskId: t.id, err: e }, 'wait timeout not applied'));
  }
  return early + expired;
}
