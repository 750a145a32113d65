import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createHmac } from 'node:crypto';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { cliWith } from '../helpers/cli.js';
import { agentCreate, dagCreate, databaseReset, rowsOf } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { webhookAdd } from '../../src/webhooks/webhooks.js';
import { webhookDispatcherCreate } from '../../src/maintenance/webhook-dispatcher.js';
import { InvalidInputError } from '../../src/errors.js';
import { timePasses } from '../helpers/clock.js';

// The receivers run on this machine: loopback, which webhooks reach only when an operator allows it.
const LOCAL = ['127.0.0.1'];

const database = await testDatabase();
const { db } = database;
beforeEach(() => databaseReset(db));

interface Received { headers: IncomingHttpHeaders; body: any; answered: number }

/** A webhook receiver on a free port that answers each delivery's attempts with the next of `statuses` (then 200), or hangs. */
async function receiver(statuses: Array<number | 'hang'> = []) {
  const got: Received[] = [];
  const attemptsOf = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const delivery = String(req.headers['dagent-delivery']);
      const n = attemptsOf.get(delivery) ?? 0;
      attemptsOf.set(delivery, n + 1);
      const answer = statuses[n] ?? 200;
      got.push({ headers: req.headers, body: JSON.parse(raw), answered: answer === 'hang' ? 0 : answer });
      if (answer === 'hang') return; // never answers: the dispatcher's timeout must cut it
      res.writeHead(answer).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  afterAll(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));
  return { url: `http://127.0.0.1:${port}/hook`, got };
}

/** Dead-letter one task of a fresh DAG (non-retryable failure); returns its DAG and task. */
async function deadLetterOne(name: string): Promise<{ dagId: string; taskId: string }> {
  const dagId = await dagCreate(db, `name: ${name}\ntasks:\n  job: { type: build }\n  after: { type: t, depends_on: [job] }\n`);
  const agent = await agentCreate(db, `agent-${name}`);
  const [t] = await taskClaim(db, agent, { dagId, start: true });
  await taskFail(db, { taskId: t!.id, fence: t!.fence, errorClass: 'crash', message: 'boom', retryable: false });
  return { dagId, taskId: t!.id };
}

/** Run the dispatcher until no delivery is pending (retries are due within milliseconds here). */
async function dispatchAll(dispatcher: ReturnType<typeof webhookDispatcherCreate>) {
  for (let i = 0; i < 200; i++) {
    await dispatcher.runOnce();
    const [p] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from webhook_deliveries where status = 'pending'`);
    if (p!.n === 0) return;
    await timePasses(db, 20);
  }
  throw new Error('deliveries still pending');
}

const fast = { retryBaseSec: 0.01, maxDelaySec: 0.05, timeoutSec: 1, allowHosts: LOCAL };

describe('webhooks', () => {
  it('a receiver that fails the first two deliveries gets exactly one event per dead letter, and every attempt is recorded', async () => {
    const hook = await receiver([500, 503]);
    await webhookAdd(db, { url: hook.url, allowHosts: LOCAL });
    const first = await deadLetterOne('one');
    const second = await deadLetterOne('two');
    await dispatchAll(webhookDispatcherCreate({ db, ...fast }));

    const accepted = hook.got.filter((g) => g.answered === 200);
    expect(accepted.map((g) => g.body.task_id).sort()).toEqual([first.taskId, second.taskId].sort());
    expect(accepted.every((g) => g.body.type === 'task.dead_lettered')).toBe(true);
    const ofFirst = accepted.find((g) => g.body.task_id === first.taskId)!;
    expect(ofFirst.body).toMatchObject({
      dag_id: first.dagId, data: { poisonPill: false }, task: { key: 'job', type: 'build', status: 'dead_lettered' }, dag: { name: 'one', status: 'blocked' },
    });
    // The two failed attempts and the success carry the same delivery and event ids: a receiver can de-duplicate.
    expect(hook.got).toHaveLength(6);
    const retried = hook.got.filter((g) => g.headers['dagent-delivery'] === hook.got[0]!.headers['dagent-delivery']);
    expect(retried.map((g) => g.answered)).toEqual([500, 503, 200]);

    const rows = await rowsOf<{ status: string; attempts: number; history: Array<{ status: number }> }>(db, sql`
      select status, attempts, history from webhook_deliveries order by attempts desc`);
    expect(rows.map((r) => [r.status, r.attempts])).toEqual([['delivered', 3], ['delivered', 3]]);
    expect(rows[0]!.history.map((h) => h.status)).toEqual([500, 503, 200]);
    // `dagent webhooks deliveries --json`: each attempt's `at` (kept in the row's JSON) is ISO 8601, like every instant.
    const listed = (await cliWith({ ...process.env, DATABASE_URL: database.url })('webhooks', 'deliveries', '--json')).json();
    expect(listed[0].history.map((h: { status: number; at: string }) => [h.status, h.at])).toEqual(
      [500, 503, 200].map((status) => [status, expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)]));
    expect(listed[0].createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('a receiver that hangs or refuses connections never holds up the engine; it is retried, then given up', async () => {
    const hung = await receiver(['hang', 'hang', 'hang']);
    await webhookAdd(db, { url: hung.url, allowHosts: LOCAL });
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const closedPort = (closed.address() as { port: number }).port;
    await new Promise<void>((r) => closed.close(() => r()));
    await webhookAdd(db, { url: `http://127.0.0.1:${closedPort}/refused`, allowHosts: LOCAL });
    const started = Date.now();
    await deadLetterOne('slow');
    expect(Date.now() - started).toBeLessThan(2_000); // the outbox row is written in the failing transaction; nothing waits on HTTP
    await dispatchAll(webhookDispatcherCreate({ db, ...fast, timeoutSec: 0.3, maxAttempts: 3 }));
    const rows = await rowsOf<{ status: string; attempts: number; last_error: string }>(db, sql`select status, attempts, last_error from webhook_deliveries order by webhook_id`);
    expect(rows.map((r) => [r.status, r.attempts])).toEqual([['failed', 3], ['failed', 3]]);
    expect(rows.map((r) => r.last_error).join('\n')).toMatch(/timed out/);
    expect(rows.map((r) => r.last_error).join('\n')).toMatch(/ECONNREFUSED/);
  });

  it('DAG completion and blocking go only to the webhooks subscribed to them; bodies are signed when a secret is set', async () => {
    const dags = await receiver();
    await webhookAdd(db, { url: dags.url, events: ['dag.completed', 'dag.blocked'], secret: 's3cret', allowHosts: LOCAL });
    const dagId = await dagCreate(db, 'name: fine\ntasks:\n  only: { type: t }\n');
    const agent = await agentCreate(db, 'w');
    const [t] = await taskClaim(db, agent, { dagId, start: true });
    await taskComplete(db, { taskId: t!.id, fence: t!.fence, output: 1 });
    const blocked = await deadLetterOne('stuck');
    await dispatchAll(webhookDispatcherCreate({ db, ...fast }));
    expect(dags.got.map((g) => [g.body.type, g.body.dag_id])).toEqual([['dag.completed', dagId], ['dag.blocked', blocked.dagId]]);
    const g = dags.got[0]!;
    const expected = `sha256=${createHmac('sha256', 's3cret').update(JSON.stringify(g.body)).digest('hex')}`;
    expect(g.headers['dagent-signature']).toBe(expected);
  });

  it('refuses a bad URL or an unknown event type, in the engine and in the CLI (exit 2, nothing written)', async () => {
    await expect(webhookAdd(db, { url: 'ftp://example.com/x' })).rejects.toThrow(InvalidInputError);
    await expect(webhookAdd(db, { url: 'http://x.test/', events: ['task.dead_letter'] })).rejects.toThrow(/did you mean "task\.dead_lettered"/);
    const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
    const bad = await cli('webhooks', 'add', 'http://x.test/', '--events', 'dag.done');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/webhook event dag\.done: unknown/);
    const ok = await cli('webhooks', 'add', 'http://x.test/', '--json');
    expect(ok.code).toBe(0);
    expect(ok.json().events).toEqual(['task.dead_lettered']);
    const [n] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from webhooks`);
    expect(n!.n).toBe(1);
  });
});
