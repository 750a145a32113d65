import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { dlqList, dlqRetry } from '../../../src/engine/ops/dlq.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { approvalList, taskApprove, taskReject } from '../../../src/engine/waits/approvals.js';
import { dagGet } from '../../../src/db/queries/dags.js';
import { waitsCreate } from '../../../src/maintenance/waits-and-maps.js';
import { ConflictError, InvalidInputError, NotFoundError } from '../../../src/errors.js';
import { cliWith } from '../../helpers/cli.js';
import { testDatabase } from '../../helpers/db.js';
import { testHttp } from '../../helpers/http.js';
import { agentCreate, dagCreate, databaseReset, databaseSnapshot, drain, leaseExpire, rowsOf, taskStatusByKey } from '../../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
beforeEach(() => databaseReset(db));

/** draft (its output checked, then approved by a person) → publish, which reads the draft. */
const draftYaml = (steps: string, extra = '') => `
name: post
tasks:
  draft: { type: w, ${extra} output: { validation: [${steps}] } }
  publish: { type: w, depends_on: [draft], spec: { context: [draft] } }
`;
const approval = (more = '') => `{ kind: approval, prompt: "Read the draft before it goes out"${more} }`;
const needsText = '{ kind: json-schema, schema: { type: object, required: [text], properties: { text: { type: string, pattern: "^OK" } } } }';

/** An instant as every answer and `--json` sends it (Date.toISOString). */
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

const idOf = async (dagId: string, key: string) => (await rowsOf<{ id: string }>(db, sql`select id from tasks where dag_id = ${dagId} and key = ${key}`))[0]!.id;
const approvalTaskOf = async (taskId: string) => (await rowsOf<{ id: string; status: string }>(db, sql`select id, status from tasks where validates_id = ${taskId} order by created_at desc limit 1`))[0]!;

/** Submit, let agent w write the draft with `output`: the draft is VALIDATING, its approval WAITING. */
async function draftWaiting(yaml: string, output: unknown = { text: 'OK v1' }): Promise<{ dagId: string; draftId: string }> {
  const dagId = await dagCreate(db, yaml);
  await agentCreate(db, 'w');
  expect(await drain(db, 'w', () => output)).toEqual(['draft']);
  const draftId = await idOf(dagId, 'draft');
  expect(await taskStatusByKey(db, dagId)).toMatchObject({ draft: 'validating', publish: 'pending' });
  expect((await approvalTaskOf(draftId)).status).toBe('waiting');
  return { dagId, draftId };
}

describe('approval steps', () => {
  it('wait for a person, never for an agent; approving completes the task and its dependents run with the output', async () => {
    const { dagId, draftId } = await draftWaiting(draftYaml(`${needsText}, ${approval()}`));
    // Even an agent that registers the approval capability never gets it.
    await agentCreate(db, 'sneaky', ['validate:approval']);
    expect(await taskClaim(db, 'sneaky')).toEqual([]);
    const [listed] = await approvalList(db);
    expect([listed!.taskId, listed!.taskKey, listed!.dagName, listed!.step, listed!.prompt, listed!.output]).toEqual([draftId, 'draft', 'post', 1, 'Read the draft before it goes out', { text: 'OK v1' }]);

    const r = await taskApprove(db, draftId, { by: 'cli:alice', comment: 'good to go' });
    expect([r.decision, r.outcome.status]).toEqual(['approved', 'completed']);
    expect(await approvalList(db)).toEqual([]);
    const [publish] = await taskClaim(db, 'w');
    expect([publish!.key, publish!.inputs]).toEqual(['publish', { draft: { text: 'OK v1' } }]);
    await taskComplete(db, { taskId: publish!.id, fence: publish!.fence, output: {} });
    expect((await dagGet(db, dagId))!.status).toBe('completed');
    const events = await rowsOf<{ type: string; data: Record<string, unknown> }>(db, sql`
      select type, data from events where type in ('task.waiting', 'task.approved') order by id`);
    expect(events.map((e) => e.type)).toEqual(['task.waiting', 'task.approved']);
    expect(events[0]!.data).toMatchObject({ approval_of: draftId, step: 1 });
    expect(events[1]!.data).toMatchObject({ by: 'cli:alice', comment: 'good to go', edited: false });
    const [attempt] = await rowsOf<{ details: { verdicts: Array<{ kind: string; pass: boolean; approved_by?: string }> } }>(db, sql`
      select details from attempts where task_id = ${draftId}`);
    expect(attempt!.details.verdicts.map((v) => [v.kind, v.pass, v.approved_by ?? null])).toEqual([['json-schema', true, null], ['approval', true, 'cli:alice']]);
  });

  it('an approver may replace the output and later steps check the new one; a step with allow_edit: false refuses edits and nothing changes', async () => {
    const { draftId } = await draftWaiting(draftYaml(`${approval()}, ${needsText}`, 'retry: { strategy: immediate },'));
    const bad = await taskApprove(db, draftId, { by: 'cli:alice', output: { text: 'not ok' } });
    expect(bad.outcome.status).toBe('rejected');
    expect((await rowsOf<{ status: string }>(db, sql`select status from tasks where id = ${draftId}`))[0]!.status).toBe('ready');
    await drain(db, 'w', () => ({ text: 'OK v2' }));
    const good = await taskApprove(db, draftId, { by: 'cli:alice', output: { text: 'OK v2, tightened' } });
    expect(good.outcome.status).toBe('completed');
    const [row] = await rowsOf<{ output: unknown }>(db, sql`select output from tasks where id = ${draftId}`);
    expect(row!.output).toEqual({ text: 'OK v2, tightened' });

    await databaseReset(db);
    const locked = await draftWaiting(draftYaml(approval(', allow_edit: false')));
    const before = await databaseSnapshot(db);
    await expect(taskApprove(db, locked.draftId, { by: 'cli:alice', output: { text: 'mine' } })).rejects.toThrow(/does not allow editing/);
    await expect(taskApprove(db, locked.draftId, { by: 'cli:alice', output: { text: 'a\u0000' } })).rejects.toThrow(InvalidInputError);
    expect(await databaseSnapshot(db)).toBe(before);
  });

  it('a rejection fails the attempt with the comment, and the retry\'s agent is told; a rejection needs a comment', async () => {
    const { dagId, draftId } = await draftWaiting(draftYaml(approval(), 'retry: { strategy: immediate },'), { text: 'OK but no sources' });
    await expect(taskReject(db, draftId, { by: 'cli:bob', comment: '  ' })).rejects.toThrow(/needs a comment/);
    const r = await taskReject(db, draftId, { by: 'cli:bob', comment: 'cite the incident report' });
    expect(r.outcome.status === 'rejected' && r.outcome.failure.status).toBe('ready');
    const [again] = await taskClaim(db, 'w');
    expect(again!.key).toBe('draft');
    const [previous] = again!.previousAttempts;
    expect(previous!.errorClass).toBe('invalid_output');
    expect(previous!.errorMessage).toContain('cite the incident report');
    expect(previous!.rejectedOutput).toEqual({ text: 'OK but no sources' });
    expect(previous!.verdicts).toEqual([expect.objectContaining({ kind: 'approval', pass: false, reasons: ['cite the incident report'], rejected_by: 'cli:bob' })]);
    await taskComplete(db, { taskId: again!.id, fence: again!.fence, output: { text: 'OK, see INC-7' } });
    await taskApprove(db, draftId, { by: 'cli:bob' });
    expect(await drain(db, 'w')).toEqual(['publish']);
    expect((await dagGet(db, dagId))!.status).toBe('completed');
  });

  it('two people deciding at once: one decision counts; a task with nothing waiting is a conflict, an unknown one not found', async () => {
    const { draftId } = await draftWaiting(draftYaml(approval(), 'retry: { strategy: immediate },'));
    const settled = await Promise.allSettled([
      taskApprove(db, draftId, { by: 'cli:alice' }), taskReject(db, draftId, { by: 'cli:bob', comment: 'no' }), taskApprove(db, draftId, { by: 'cli:carol' }),
    ]);
    expect(settled.filter((s) => s.status === 'fulfilled')).toHaveLength(1);
    for (const s of settled.filter((x) => x.status === 'rejected')) expect((s as PromiseRejectedResult).reason).toBeInstanceOf(ConflictError);
    const approvalTask = await approvalTaskOf(draftId);
    expect((await rowsOf(db, sql`select 1 from attempts where task_id = ${approvalTask.id}`)).length).toBe(1);
    await expect(taskApprove(db, draftId, { by: 'cli:alice' })).rejects.toBeInstanceOf(ConflictError);
    await expect(taskApprove(db, 'tsk_nosuchtask0000', { by: 'cli:alice' })).rejects.toBeInstanceOf(NotFoundError);
  });

  it('a timeout takes the step\'s action: to the dead-letter queue (a retry waits again), approve, or reject', async () => {
    const dead = await draftWaiting(draftYaml(approval(', timeout: 4h')));
    const approvalId = (await approvalTaskOf(dead.draftId)).id;
    const [lease] = await rowsOf<{ left: number }>(db, sql`select extract(epoch from lease_expires_at - now())::int as left from tasks where id = ${approvalId}`);
    expect(lease!.left).toBeGreaterThan(4 * 3600 - 60);
    await leaseExpire(db, approvalId);
    expect(await waitsCreate({ db }).runOnce()).toBe(1);
    expect((await approvalTaskOf(dead.draftId)).status).toBe('dead_lettered');
    expect((await dagGet(db, dead.dagId))!.status).toBe('blocked');
    const [entry] = await dlqList(db, { dagId: dead.dagId });
    expect(entry!.errorClass).toBe('timeout');
    await dlqRetry(db, entry!.id, {});
    expect((await approvalTaskOf(dead.draftId)).status).toBe('waiting');
    expect((await taskApprove(db, dead.draftId, { by: 'cli:alice' })).outcome.status).toBe('completed');

    for (const [action, draftStatus] of [['approve', 'completed'], ['reject', 'ready']] as const) {
      await databaseReset(db);
      const d = await draftWaiting(draftYaml(approval(`, timeout: 1h, on_timeout: ${action}`), 'retry: { strategy: immediate },'));
      await leaseExpire(db, (await approvalTaskOf(d.draftId)).id);
      expect(await waitsCreate({ db }).runOnce()).toBe(1);
      expect((await taskStatusByKey(db, d.dagId)).draft).toBe(draftStatus);
      const [event] = await rowsOf<{ type: string; data: { by: string } }>(db, sql`select type, data from events where type in ('task.approved', 'task.rejected')`);
      expect([event!.type, event!.data.by]).toEqual([`task.${action}d`.replace('rejectd', 'rejected'), 'timeout']);
    }
  });
});

describe('approvals over HTTP and the CLI', () => {
  it('a read token lists them; only an admin decides (never an agent, not even the one that wrote it); a bad request changes nothing', async () => {
    const { draftId } = await draftWaiting(draftYaml(approval(', timeout: 4h')));
    const list = await http.call('GET', '/api/approvals');
    expect([list.status, list.body.approvals.map((a: { taskId: string }) => a.taskId)]).toEqual([200, [draftId]]);
    expect(list.body.approvals[0]).toMatchObject({ waitingSince: expect.stringMatching(ISO), expiresAt: expect.stringMatching(ISO) });
    const writer = await http.agentToken('w');
    const before = await databaseSnapshot(db);
    expect((await http.call('POST', `/api/tasks/${draftId}/approve`, { token: writer, body: {} })).status).toBe(403);
    expect((await http.call('POST', `/api/tasks/${draftId}/reject`, { body: {} })).status).toBe(400);
    expect((await http.call('POST', `/api/tasks/${draftId}/approve`, { body: { comment: 'ok', approve_all: true } })).status).toBe(400);
    expect(await databaseSnapshot(db)).toBe(before);
    const ok = await http.call('POST', `/api/tasks/${draftId}/reject`, { body: { comment: 'too long' } });
    expect([ok.status, ok.body.decision]).toEqual([200, 'rejected']);
    expect((await http.call('POST', `/api/tasks/${draftId}/approve`, { body: {} })).status).toBe(409);
  });

  it('dagent approvals lists them, approve --output replaces the output, and bad JSON is exit 2 naming the option', async () => {
    const { dagId, draftId } = await draftWaiting(draftYaml(approval()));
    const listed = await cli('approvals');
    expect([listed.code, listed.stdout]).toEqual([0, expect.stringContaining(`${draftId}  post/draft  step 1: Read the draft`)]);
    const json = await cli('approvals', '--json');
    expect(json.json().approvals).toEqual([expect.objectContaining({ taskId: draftId, waitingSince: expect.stringMatching(ISO), expiresAt: null })]);
    const bad = await cli('approve', draftId, '--output', '{text: 1}');
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining('--output: not JSON')]);
    const ok = await cli('approve', draftId, '--output', '{"text": "OK, edited"}', '--comment', 'fixed a typo');
    expect([ok.code, ok.stdout]).toEqual([0, expect.stringContaining('approved (output replaced); the task is completed')]);
    const [row] = await rowsOf<{ output: unknown }>(db, sql`select output from tasks where id = ${draftId}`);
    expect(row!.output).toEqual({ text: 'OK, edited' });
    expect((await taskStatusByKey(db, dagId)).publish).toBe('ready');
    const none = await cli('reject', draftId, '--comment', 'late');
    expect([none.code, none.stderr]).toEqual([1, expect.stringContaining('no approval is waiting')]);
  });
});

describe('approval tasks', () => {
  const gateYaml = (approvalFields = '', extra = '') => `
name: release
tasks:
  notes: { type: w }
  signoff: { type: gate, depends_on: [notes], approval: { prompt: "Ship these notes?"${approvalFields} }${extra} }
  ship: { type: w, depends_on: [signoff], spec: { context: [signoff] } }
`;
  /** notes done by agent w: signoff WAITING for a person. */
  async function gateWaiting(yaml: string): Promise<{ dagId: string; gateId: string }> {
    const dagId = await dagCreate(db, yaml);
    await agentCreate(db, 'w');
    expect(await drain(db, 'w', () => ({ text: 'v1 notes' }))).toEqual(['notes']);
    expect(await taskStatusByKey(db, dagId)).toMatchObject({ notes: 'completed', signoff: 'waiting', ship: 'pending' });
    return { dagId, gateId: await idOf(dagId, 'signoff') };
  }

  it('wait for a person with the upstream outputs shown; no agent claims one; approving completes it and downstream reads the decision', async () => {
    const { dagId, gateId } = await gateWaiting(gateYaml());
    await agentCreate(db, 'gate-runner', ['gate', 'validate:approval']);
    expect(await taskClaim(db, 'gate-runner')).toEqual([]);
    expect(await approvalList(db)).toEqual([expect.objectContaining({
      id: gateId, taskId: gateId, taskKey: 'signoff', step: null, prompt: 'Ship these notes?', output: { notes: { text: 'v1 notes' } },
    })]);
    const r = await taskApprove(db, gateId, { by: 'cli:ana', comment: 'looks right' });
    expect(r).toMatchObject({ taskId: gateId, decision: 'approved', outcome: { status: 'completed', unblocked: 1 } });
    const [ship] = await taskClaim(db, 'w');
    expect(ship!.inputs).toEqual({ signoff: { approved: true, by: 'cli:ana', comment: 'looks right' } });
    const [event] = await rowsOf<{ data: { by: string } }>(db, sql`select data from events where type = 'task.approved' and task_id = ${gateId}`);
    expect(event!.data.by).toBe('cli:ana');
    await expect(taskApprove(db, gateId, { by: 'cli:bo' })).rejects.toBeInstanceOf(ConflictError);
    expect(dagId).toBeTruthy();
  });

  it('an approver may give the output; a rejection fails it with the comment and, by default, dead-letters it for a person (retry waits again)', async () => {
    const first = await gateWaiting(gateYaml());
    await taskApprove(db, first.gateId, { by: 'cli:ana', output: { channel: '#releases' } });
    const [out] = await rowsOf<{ output: unknown }>(db, sql`select output from tasks where id = ${first.gateId}`);
    expect(out!.output).toEqual({ channel: '#releases' });

    await databaseReset(db);
    const { dagId, gateId } = await gateWaiting(gateYaml());
    await expect(taskReject(db, gateId, { by: 'cli:ana', comment: '  ' })).rejects.toBeInstanceOf(InvalidInputError);
    const r = await taskReject(db, gateId, { by: 'cli:ana', comment: 'version number is wrong' });
    expect(r.outcome).toMatchObject({ status: 'rejected', failure: { status: 'dead_lettered' } });
    expect((await dagGet(db, dagId))!.status).toBe('blocked');
    const [attempt] = await rowsOf<{ error_class: string; error_message: string }>(db, sql`select error_class, error_message from attempts where task_id = ${gateId}`);
    expect(attempt).toEqual({ error_class: 'rejected', error_message: 'version number is wrong' });
    const [dl] = await dlqList(db, { dagId });
    await dlqRetry(db, dl!.id, { by: 'test' });
    expect((await taskStatusByKey(db, dagId)).signoff).toBe('waiting');
    expect((await approvalList(db)).map((a) => a.id)).toEqual([gateId]);
  });

  it('those that began waiting at once are listed in key order, g2 before g10', async () => {
    const keys = Array.from({ length: 13 }, (_, i) => `g${i}`);
    // Declared last first: neither the file's order nor the rows' is natural by chance.
    const gates = [...keys].reverse().map((k) => `  ${k}: { type: gate, depends_on: [notes], approval: { prompt: "Ship?" } }`);
    await dagCreate(db, `name: gates\ntasks:\n  notes: { type: w }\n${gates.join('\n')}\n`);
    await agentCreate(db, 'w');
    expect(await drain(db, 'w', () => ({ text: 'v1' }))).toEqual(['notes']);
    expect((await approvalList(db)).map((a) => a.taskKey)).toEqual(keys);
    expect((await cli('approvals', '--json')).json().approvals.map((a: { taskKey: string }) => a.taskKey)).toEqual(keys);
  });

  it('a timeout takes its action: approve, reject, or (the default) the dead-letter queue', async () => {
    const waits = waitsCreate({ db });
    for (const [action, status, attempt] of [['approve', 'completed', 'completed'], ['reject', 'dead_lettered', 'timeout'], ['dead_letter', 'dead_lettered', 'timeout']] as const) {
      await databaseReset(db);
      const { gateId } = await gateWaiting(gateYaml(`, timeout: 1h${action === 'dead_letter' ? '' : `, on_timeout: ${action}`}`));
      expect(await waits.runOnce()).toBe(0);
      await leaseExpire(db, gateId);
      expect(await waits.runOnce()).toBe(1);
      const [row] = await rowsOf<{ status: string }>(db, sql`select status from tasks where id = ${gateId}`);
      expect(row!.status, action).toBe(status);
      const [a] = await rowsOf<{ outcome: string; error_class: string | null }>(db, sql`select outcome, error_class from attempts where task_id = ${gateId}`);
      expect(a!.outcome === 'completed' ? 'completed' : a!.error_class, action).toBe(attempt);
    }
  });

  it('a task with approval refuses the fields that tell an agent what to do, naming them; nothing is written', async () => {
    const before = await databaseSnapshot(db);
    for (const [extra, field] of [[', spec: { prompt: x }', 'spec'], [', output: { type: json }', 'output'], [', wait_for: { signal: go }', 'approval']] as const) {
      await expect(dagCreate(db, gateYaml('', extra))).rejects.toMatchObject({ message: expect.stringContaining(`tasks.signoff.${field}: a task`) });
    }
    expect(await databaseSnapshot(db)).toBe(before);
  });
});
