import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { dagCancel } from '../../../src/engine/dag/cancel.js';
import { dlqList, dlqRetry } from '../../../src/engine/ops/dlq.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { taskRerun } from '../../../src/engine/dag/rerun.js';
import { signalSend } from '../../../src/engine/waits/signals.js';
import { webhookAdd } from '../../../src/webhooks/webhooks.js';
import { dagGet } from '../../../src/db/queries/dags.js';
import { waitsCreate } from '../../../src/maintenance/waits-and-maps.js';
import { InvalidInputError } from '../../../src/errors.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, databaseSnapshot, drain, leaseExpire, rowsOf, taskStatusByKey } from '../../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
beforeEach(() => databaseReset(db));

const idOf = async (dagId: string, key: string) => (await rowsOf<{ id: string }>(db, sql`select id from tasks where dag_id = ${dagId} and key = ${key}`))[0]!.id;
const loopPass = () => waitsCreate({ db }).runOnce();

/** build → gate (waits for deploy:ENV, or the given wait_for) → ship, which reads the gate's output. */
const gateYaml = (waitFor = '{ signal: "deploy:${params.env}" }') => `
name: release
params: { env: { default: prod } }
tasks:
  build: { type: w }
  gate: { type: gate, depends_on: [build], wait_for: ${waitFor} }
  ship: { type: w, depends_on: [gate], spec: { context: [gate] } }
`;

describe('tasks that wait for a signal', () => {
  it('are never claimed; the signal completes the waiting task with its payload, and its dependents run with it as input', async () => {
    const dagId = await dagCreate(db, gateYaml());
    await agentCreate(db, 'w');
    expect(await drain(db, 'w')).toEqual(['build']);
    expect(await taskStatusByKey(db, dagId)).toEqual({ build: 'completed', gate: 'waiting', ship: 'pending' });
    expect(await drain(db, 'w')).toEqual([]);
    const gateId = await idOf(dagId, 'gate');
    const [waitingEvent] = await rowsOf<{ data: Record<string, unknown> }>(db, sql`select data from events where task_id = ${gateId} and type = 'task.waiting'`);
    expect(waitingEvent!.data).toEqual({ signal: 'deploy:prod', attempt: 1, timeout_sec: null });

    const sent = await signalSend(db, 'deploy:prod', { approved_by: 'ci', build: 42 }, { by: 'test' });
    expect(sent.completed).toEqual([{ id: gateId, dagId, key: 'gate' }]);
    expect(await taskStatusByKey(db, dagId)).toEqual({ build: 'completed', gate: 'completed', ship: 'ready' });
    const [ship] = await taskClaim(db, 'w');
    expect([ship!.key, ship!.inputs]).toEqual(['ship', { gate: { approved_by: 'ci', build: 42 } }]);
    await taskComplete(db, { taskId: ship!.id, fence: ship!.fence, output: {} });
    expect((await dagGet(db, dagId))!.status).toBe('completed');

    // The wait is the gate's attempt: no agent, the signal and its sender on it.
    const attempts = await rowsOf<{ agent_id: string | null; outcome: string; details: unknown }>(db, sql`select agent_id, outcome, details from attempts where task_id = ${gateId}`);
    expect(attempts).toEqual([{ agent_id: null, outcome: 'completed', details: { signal: 'deploy:prod', by: 'test' } }]);
    // Sent again, it finds nobody waiting: recorded, nothing completed twice.
    expect((await signalSend(db, 'deploy:prod', { again: true })).completed).toEqual([]);
    const [kept] = await rowsOf<{ received: number; payload: unknown }>(db, sql`select received, payload from signals where key = 'deploy:prod'`);
    expect(kept).toEqual({ received: 2, payload: { again: true } });
    expect((await rowsOf(db, sql`select 1 from attempts where task_id = ${gateId}`)).length).toBe(1);
  });

  it('a signal sent while the task still waits on its upstream completes it once it begins waiting; one sent before the task existed does not', async () => {
    await signalSend(db, 'deploy:staging', { stale: true });
    const stale = await dagCreate(db, gateYaml(), { env: 'staging' });
    const early = await dagCreate(db, gateYaml(), { env: 'prod' });
    expect((await signalSend(db, 'deploy:prod', { early: true })).completed).toEqual([]);
    await agentCreate(db, 'w');
    expect(await drain(db, 'w')).toEqual(['build', 'build']);
    expect(await loopPass()).toBe(1);
    expect(await taskStatusByKey(db, early)).toEqual({ build: 'completed', gate: 'completed', ship: 'ready' });
    expect(await taskStatusByKey(db, stale)).toEqual({ build: 'completed', gate: 'waiting', ship: 'pending' });
    const [out] = await rowsOf<{ output: unknown }>(db, sql`select output from tasks where id = ${await idOf(early, 'gate')}`);
    expect(out!.output).toEqual({ early: true });
  });

  it('a wait past its timeout fails with class timeout and is dead-lettered; retried from the queue it waits again, and a signal then completes it', async () => {
    const dagId = await dagCreate(db, gateYaml('{ signal: "deploy:${params.env}", timeout: 90s }'));
    await agentCreate(db, 'w');
    await drain(db, 'w');
    const gateId = await idOf(dagId, 'gate');
    const [lease] = await rowsOf<{ left: number }>(db, sql`select extract(epoch from lease_expires_at - now())::int as left from tasks where id = ${gateId}`);
    expect(lease!.left).toBeGreaterThan(80);
    expect(await loopPass()).toBe(0);
    await leaseExpire(db, gateId);
    expect(await loopPass()).toBe(1);
    expect(await taskStatusByKey(db, dagId)).toEqual({ build: 'completed', gate: 'dead_lettered', ship: 'pending' });
    const [entry] = await dlqList(db, { dagId });
    expect([entry!.errorClass, (await dagGet(db, dagId))!.status]).toEqual(['timeout', 'blocked']);
    const [failed] = await rowsOf<{ error_message: string }>(db, sql`select error_message from attempts where task_id = ${gateId}`);
    expect(failed!.error_message).toBe('no signal deploy:prod within 90s');

    await dlqRetry(db, entry!.id, { note: 'the deploy runs late today' });
    const [again] = await rowsOf<{ status: string; attempts: number }>(db, sql`select status, attempts from tasks where id = ${gateId}`);
    expect(again).toEqual({ status: 'waiting', attempts: 2 });
    expect((await signalSend(db, 'deploy:prod', { late: true })).completed.map((t) => t.key)).toEqual(['gate']);
    expect(await drain(db, 'w')).toEqual(['ship']);
    expect((await dagGet(db, dagId))!.status).toBe('completed');
  });

  it('two signals racing for one waiting task complete it once; a signal racing its timeout either completes or fails it, never both', async () => {
    const dagId = await dagCreate(db, gateYaml('{ signal: "deploy:${params.env}", timeout: 1h }'));
    await agentCreate(db, 'w');
    await drain(db, 'w');
    const gateId = await idOf(dagId, 'gate');
    const results = await Promise.all([signalSend(db, 'deploy:prod', { n: 1 }), signalSend(db, 'deploy:prod', { n: 2 })]);
    expect(results.map((r) => r.completed.length).sort()).toEqual([0, 1]);
    const winner = results.find((r) => r.completed.length === 1)!;
    const [row] = await rowsOf<{ output: { n: number } }>(db, sql`select output from tasks where id = ${gateId}`);
    // The task holds the payload of the signal that completed it, not the other's.
    expect(row!.output.n).toBe(results.indexOf(winner) + 1);
    expect(winner.receivedAt).toBeInstanceOf(Date);
    expect((await rowsOf(db, sql`select 1 from attempts where task_id = ${gateId}`)).length).toBe(1);

    for (let round = 0; round < 5; round++) {
      const other = await dagCreate(db, gateYaml('{ signal: "race:${params.env}", timeout: 1h }'), { env: `r${round}` });
      await drain(db, 'w');
      const id = await idOf(other, 'gate');
      await leaseExpire(db, id);
      await Promise.all([signalSend(db, `race:r${round}`, { round }), loopPass()]);
      const [t] = await rowsOf<{ status: string }>(db, sql`select status from tasks where id = ${id}`);
      expect(['completed', 'dead_lettered']).toContain(t!.status);
      const settled = await rowsOf<{ outcome: string }>(db, sql`select outcome from attempts where task_id = ${id}`);
      expect(settled.map((a) => a.outcome)).toEqual([t!.status === 'completed' ? 'completed' : 'failed']);
    }
  });

  it('a cancelled DAG cancels its waiting task and a later signal completes nothing; a re-run waits for a new signal', async () => {
    const cancelled = await dagCreate(db, gateYaml('{ signal: "release:${params.env}" }'), { env: 'a' });
    const rerun = await dagCreate(db, gateYaml('{ signal: "release:${params.env}" }'), { env: 'b' });
    await agentCreate(db, 'w');
    await drain(db, 'w');
    await dagCancel(db, cancelled, 'test');
    expect((await taskStatusByKey(db, cancelled)).gate).toBe('cancelled');
    expect((await signalSend(db, 'release:a', {})).completed).toEqual([]);
    expect((await taskStatusByKey(db, cancelled)).gate).toBe('cancelled');

    await signalSend(db, 'release:b', { first: true });
    const gateId = await idOf(rerun, 'gate');
    await taskRerun(db, gateId);
    expect((await taskStatusByKey(db, rerun)).gate).toBe('waiting');
    expect(await loopPass()).toBe(0);
    expect((await taskStatusByKey(db, rerun)).gate).toBe('waiting');
    await signalSend(db, 'release:b', { second: true });
    const [out] = await rowsOf<{ output: unknown }>(db, sql`select output from tasks where id = ${gateId}`);
    expect(out!.output).toEqual({ second: true });
  });

  it('a webhook subscribed to task.waiting is told, with the task waiting; a bad key or payload is refused and changes nothing', async () => {
    await webhookAdd(db, { url: 'https://ci.example.com/hooks/dagent', events: ['task.waiting'] });
    const dagId = await dagCreate(db, gateYaml());
    await agentCreate(db, 'w');
    await drain(db, 'w');
    const [delivery] = await rowsOf<{ event_type: string; payload: { task: { status: string }; data: { signal: string } } }>(db, sql`select event_type, payload from webhook_deliveries`);
    expect([delivery!.event_type, delivery!.payload.task.status, delivery!.payload.data.signal]).toEqual(['task.waiting', 'waiting', 'deploy:prod']);

    const before = await databaseSnapshot(db);
    await expect(signalSend(db, 'deploy/prod', {})).rejects.toThrow(InvalidInputError);
    await expect(signalSend(db, 'deploy:prod', { text: 'a\u0000b' })).rejects.toThrow(/payload/);
    expect(await databaseSnapshot(db)).toBe(before);
    expect((await taskStatusByKey(db, dagId)).gate).toBe('waiting');
  });
});
