import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { textArray } from '../../src/db/statement.js';
import { CLI_COMPILED, cliWith } from '../helpers/cli.js';
import { leash } from '../helpers/child-leash.js';
import { eventually } from '../helpers/wait.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { LISTENER_DEFAULTS, LOOP_LEASE_DEFAULTS } from '../../src/config/index.js';
import { LOOPS_ELECTED } from '../../src/maintenance/index.js';

// Several `dagent up` nodes on one database: each maintenance loop runs on one node, another takes it over when
// that node is killed; every node's event stream shows every node's events; a webhook is delivered once.
const database = await testDatabase({ poolSize: 4 });
const { db } = database;
/**
 * The nodes' loop lease (DAGENT_LOOP_LEASE_SEC), shorter than the default LOOP_LEASE_DEFAULTS.ttlSec: what is checked
 * is that a killed node's loops move once its leases lapse and no sooner, whatever their length.
 */
const LEASE_SEC = 6;
/** How often a node renews its leases besides its loops' ticks. */
const RENEW_SEC = LEASE_SEC / LOOP_LEASE_DEFAULTS.renewsPerLease;
const env = {
  ...process.env, DATABASE_URL: database.url, DAGENT_HTTP_PORT: '0', DAGENT_RETENTION: 'off', DAGENT_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
  DAGENT_LOOP_LEASE_SEC: String(LEASE_SEC),
};
/** The loops that run on one node (the others, the scheduler and the webhook dispatcher, share their rows out on every node), by name. */
const ELECTED = [...LOOPS_ELECTED].sort();

interface Node { child: ChildProcess; url: string; exited: Promise<number | null>; output: () => string }
const nodes: Node[] = [];
afterAll(() => { for (const n of nodes) if (n.child.exitCode === null && n.child.signalCode === null) n.child.kill('SIGKILL'); });

async function nodeStart(): Promise<Node> {
  const child = leash(spawn(process.execPath, [...CLI_COMPILED, 'up'], { env, stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  child.stdout!.on('data', (b) => (out += b));
  child.stderr!.on('data', (b) => (out += b));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = (await eventually('dagent up serving', async () => /on (http:\/\/\S+)\//.exec(out)?.[1]))!;
  const node = { child, url, exited, output: () => out };
  nodes.push(node);
  return node;
}

const leases = () => rowsOf<{ name: string; holder: string; live: boolean }>(db, sql`
  select name, holder, expires_at >= now() as live from maintenance_leases order by name`);
const pidOf = (holder: string) => Number(holder.split('/').at(-2));

describe('several dagent up nodes on one database', () => {
  it('elect one node per maintenance loop, show each other\'s events, deliver a webhook once, and take a killed node\'s loops over within a lease', async () => {
    const { token } = await tokenCreate(db, { role: 'admin', name: 'nodes' });
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const post = async (base: string, path: string, body: unknown) => {
      const res = await fetch(`${base}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as any };
    };
    const deliveries: Array<{ delivery: string; dag: string }> = [];
    const receiver = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        deliveries.push({ delivery: String(req.headers['dagent-delivery']), dag: (JSON.parse(body) as { dag_id: string }).dag_id });
        res.end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    try {
      const hook = await cliWith(env)('webhooks', 'add', `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`, '--events', 'dag.completed');
      expect(hook.code, hook.stderr).toBe(0);
      const a = await nodeStart();
      const b = await nodeStart();
      const pids = [a.child.pid, b.child.pid];

      // One holder per loop, each one of the two nodes.
      await eventually('every elected loop has a holder', async () => (await leases()).length === ELECTED.length);
      const held = await leases();
      expect(held.map((l) => l.name)).toEqual(ELECTED);
      for (const l of held) expect(pids).toContain(pidOf(l.holder));
      // Each written for DAGENT_LOOP_LEASE_SEC from its last renewal, not for the default (clock_timestamp(): read
      // after every renewal this statement sees).
      const [ahead] = await rowsOf<{ sec: number }>(db, sql`select max(extract(epoch from expires_at - clock_timestamp()))::float8 as sec from maintenance_leases`);
      expect(ahead!.sec).toBeLessThanOrEqual(LEASE_SEC);
      const stats = await (await fetch(`${b.url}/api/stats`, { headers })).json() as { loops: Array<{ name: string; holder: string; live: boolean }> };
      expect(stats.loops.map((l) => [l.name, l.holder, l.live])).toEqual(held.map((l) => [l.name, l.holder, true]));

      // B's event stream shows what A did.
      const seen: string[] = [];
      const stream = new AbortController();
      void (async () => {
        const res = await fetch(`${b.url}/api/events`, { headers, signal: stream.signal });
        const reader = res.body!.getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          seen.push(new TextDecoder().decode(value));
        }
      })().catch(() => {});
      expect((await post(a.url, '/api/agents', { id: 'worker', type: 'w', capabilities: ['web'], max_concurrent: 10 })).status).toBe(201);
      const dagIds: string[] = [];
      for (let i = 0; i < 5; i++) {
        const r = await post(a.url, '/api/dags', { yaml: `name: across-${i}\ntasks:\n  only: { type: w, spec: { constraints: { capabilities: [web] } } }\n` });
        expect(r.status, JSON.stringify(r.body)).toBe(201);
        dagIds.push(r.body.results[0].dagId);
      }
      const claimed = await post(a.url, '/api/agents/worker/claim', { limit: 5 });
      expect(claimed.body.tasks).toHaveLength(5);
      for (const t of claimed.body.tasks as Array<{ id: string; fence: number }>) {
        expect((await post(a.url, `/api/tasks/${t.id}/complete`, { fence: t.fence, output: {} })).status).toBe(200);
      }
      const completedOnB = () => seen.join('').split('\n\n').map((block) => Object.fromEntries(block.split('\n').map((line) => [line.slice(0, line.indexOf(': ')), line.slice(line.indexOf(': ') + 2)])))
        .filter((e) => e.event === 'dag.completed').map((e) => (JSON.parse(e.data!) as { dagId: string }).dagId);
      await eventually('B streamed the completions of the DAGs A ran', async () => dagIds.every((id) => completedOnB().includes(id)));
      stream.abort();

      // Two dispatchers, one delivery per completed DAG.
      await eventually('5 webhook deliveries', async () => deliveries.length >= 5);
      await new Promise((r) => setTimeout(r, 3_000)); // two more dispatcher ticks on each node
      expect(deliveries.map((d) => d.dag).sort()).toEqual([...dagIds].sort());
      expect(new Set(deliveries.map((d) => d.delivery)).size).toBe(5);

      // Kill -9 the promoter's node: the other takes the loop over once the lease lapses, and promotes a retry.
      const holder = held.find((l) => l.name === 'promoter')!.holder;
      const [victim, survivor] = pidOf(holder) === a.child.pid ? [a, b] : [b, a];
      const failing = await post(survivor.url, '/api/dags', { yaml: 'name: retried\ntasks:\n  again: { type: w, retry: { strategy: fixed, initial_delay: 1s, jitter: 0 }, spec: { constraints: { capabilities: [web] } } }\n' });
      const [task] = (await post(survivor.url, '/api/agents/worker/claim', {})).body.tasks as Array<{ id: string; fence: number }>;
      const killedAt = Date.now();
      victim.child.kill('SIGKILL');
      expect((await post(survivor.url, `/api/tasks/${task!.id}/fail`, { fence: task!.fence, error_class: 'crash', message: 'boom' })).body.status).toBe('retrying');
      const promoterMoved = await eventually('the survivor holds the promoter', async () => {
        const p = (await leases()).find((l) => l.name === 'promoter');
        return p && pidOf(p.holder) === survivor.child.pid ? Date.now() : undefined;
      }, (LEASE_SEC + 10) * 1000);
      // No sooner than the lease allowed: the killed node never gave it up (it renewed it last at most a renewal
      // interval, and a second to spare, before the kill).
      expect(promoterMoved - killedAt).toBeGreaterThanOrEqual((LEASE_SEC - RENEW_SEC - 1) * 1000);
      await eventually('the retry promoted', async () => (await rowsOf<{ status: string }>(db, sql`
        select status from tasks where dag_id = ${failing.body.results[0].dagId}`))[0]!.status === 'ready', 10_000);
      await eventually('the survivor holds every loop', async () => (await leases()).every((l) => pidOf(l.holder) === survivor.child.pid), (LEASE_SEC + 10) * 1000);
      expect(survivor.output()).toMatch(/maintenance loop lease taken/);
      survivor.child.kill('SIGTERM');
      expect(await survivor.exited).toBe(0);
      expect(await leases()).toEqual([]);
    } finally {
      receiver.close();
    }
  });

  it('a node killed while its part of READY hints is still dealt to it: the other node\'s waiting agents claim every task, once', async () => {
    const { token } = await tokenCreate(db, { role: 'admin', name: 'nodes-share' });
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const [c, d] = [await nodeStart(), await nodeStart()];
    /** An agent registered through `node`, then its long poll there: the ids it claimed (null: the node did not answer). */
    const poll = async (node: Node, id: string): Promise<{ claimed: Promise<string[] | null> }> => {
      expect((await fetch(`${node.url}/api/agents`, { method: 'POST', headers, body: JSON.stringify({ id, type: 'w', capabilities: ['share'], max_concurrent: 1 }) })).status).toBe(201);
      const claimed = fetch(`${node.url}/api/agents/${id}/claim`, { method: 'POST', headers, body: JSON.stringify({ wait_sec: 20 }) })
        .then(async (r) => ((await r.json()) as { tasks: Array<{ id: string }> }).tasks.map((t) => t.id), () => null);
      return { claimed };
    };
    const waitingAt = async (node: Node) => Number(/^dagent_claims_waiting (\d+)$/m.exec(await (await fetch(`${node.url}/metrics`, { headers })).text())?.[1] ?? 0);
    const rosterOf = async () => (await rowsOf<{ n: number }>(db, sql`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'dagent-listener claims'`))[0]!.n;
    const before = await rosterOf();
    // A poll on d puts d's listener on the roster; eight on c wait for the work.
    const lost = (await poll(d, 'share-d')).claimed;
    const polls = await Promise.all(Array.from({ length: 8 }, (_, i) => poll(c, `share-c${i}`)));
    await eventually('the polls waiting', async () => (await waitingAt(c)) === 8 && (await waitingAt(d)) === 1);
    await eventually('both nodes on the roster', async () => (await rosterOf()) === before + 2);
    // c reads the roster every LISTENER_DEFAULTS.rosterIntervalMs: after one more reading c counts d, and d stays in
    // c's roster for up to that long after the kill, so single tasks dealt to d (each with even odds) are left to c's
    // agents looking again.
    await new Promise((r) => setTimeout(r, LISTENER_DEFAULTS.rosterIntervalMs + 500));
    d.child.kill('SIGKILL');
    await d.exited;
    expect(await lost).toBeNull();
    // One at a time, each claimed before the next is READY: a task dealt to d has no claim on c whose hand-on could
    // take it, only c looking again.
    let answered = 0;
    for (const p of polls) void p.claimed.then(() => answered++);
    const dagIds: string[] = [];
    for (let i = 0; i < 8; i++) {
      dagIds.push(await dagCreate(db, `name: dealt-${i}\ntasks:\n  only: { type: w, spec: { constraints: { capabilities: [share] } } }\n`));
      await eventually(`task ${i + 1} claimed, well within the polls' wait`, async () => answered === i + 1, 10_000);
    }
    const got = await Promise.all(polls.map(async (p) => (await p.claimed) ?? []));
    expect(got.every((ids) => ids.length === 1)).toBe(true);
    const taken = await rowsOf<{ id: string; claimed_by: string; attempts: number }>(db, sql`
      select t.id, t.claimed_by, t.attempts from tasks t where t.dag_id = any(${textArray(dagIds)}) order by t.id`);
    expect(taken.map((t) => t.id).sort()).toEqual(got.flat().sort());
    expect(taken.every((t) => t.attempts === 1 && t.claimed_by.startsWith('share-c'))).toBe(true);
  });
});
