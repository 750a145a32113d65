import { spawn } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../src/db/open.js';
import type { Database } from '../../src/db/handle.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { CLI_COMPILED } from '../helpers/cli.js';
import { leash } from '../helpers/child-leash.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { faultProxy } from './helpers/proxy.js';
import { replicatedPair } from './helpers/standby.js';

// A failover of a highly available PostgreSQL (primary + synchronous standby) under a running fleet: the primary's
// host dies (kill -9 of every server process), the standby is promoted and the address dagent connects to (a TCP
// proxy standing for a virtual IP or a DNS name) moves to it. A `dagent up` node serving HTTP agents and a
// `dagent agent run` process go on against the new primary without being restarted. This file runs its own servers,
// whatever DATABASE_URL says: the failover is the point.
const HTTP_TASKS = 120;
const PROCESS_TASKS = 40;
const AGENTS = 8;

const pair = await replicatedPair('failover');
afterAll(() => pair.close());
const address = await faultProxy(pair.primary.url);
const agentProcess = agentProcesses(address.url);

describe('a PostgreSQL failover to a promoted synchronous standby', () => {
  it('loses no acknowledged report, runs nothing twice, and the fleet goes on against the new primary', async () => {
    const env = { ...process.env, DATABASE_URL: address.url, DAGENT_HTTP_PORT: '0', DAGENT_RETENTION: 'off', DAGENT_LOG_LEVEL: 'warn' };
    const node = leash(spawn(process.execPath, [...CLI_COMPILED, 'up'], { env, stdio: ['ignore', 'pipe', 'pipe'] }));
    let nodeOut = '';
    node.stdout!.on('data', (b) => (nodeOut += b));
    node.stderr!.on('data', (b) => (nodeOut += b));
    let observer: Database | undefined;
    try {
      const base = (await eventually('dagent up serving', async () => /on (http:\/\/\S+)\//.exec(nodeOut)?.[1], 60_000))!;
      const runner = await agentProcess('test/fixtures/agents/sleeper.ts', 'sleeper-failover');
      observer = await databaseOpen({ url: pair.primary.url, poolSize: 2 });
      const { token } = await tokenCreate(observer.db, { role: 'admin', name: 'failover' });
      const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      const post = async (p: string, body: unknown) => {
        const res = await fetch(`${base}${p}`, { method: 'POST', headers, body: JSON.stringify(body) });
        return { status: res.status, body: (await res.json()) as any };
      };

      // HTTP agents as the Python agent behaves: long-poll, work, report; a 503 or a dropped request is sent again.
      let stopping = false;
      const acknowledged = new Map<string, unknown>();
      const completedAt: number[] = [];
      const until200 = async (p: string, body: unknown) => {
        for (;;) {
          const r = await post(p, body).catch(() => ({ status: 0, body: null }));
          if ((r.status !== 503 && r.status !== 0) || stopping) return r;
          await new Promise((res) => setTimeout(res, 250));
        }
      };
      for (let a = 0; a < AGENTS; a++) expect((await until200('/api/agents', { id: `http-${a}`, type: 'h', capabilities: ['http-work'], max_concurrent: 1 })).status).toBe(201);
      const loops = Array.from({ length: AGENTS }, async (_, a) => {
        while (!stopping) {
          const claimed = await until200(`/api/agents/http-${a}/claim`, { wait_sec: 2 });
          for (const t of (claimed.body?.tasks ?? []) as Array<{ id: string; fence: number }>) {
            await new Promise((res) => setTimeout(res, 100 + Math.random() * 200));
            const output = { by: `http-${a}`, fence: t.fence };
            const r = await until200(`/api/tasks/${t.id}/complete`, { fence: t.fence, output });
            if (r.status === 200) { acknowledged.set(t.id, output); completedAt.push(performance.now()); }
          }
        }
      });

      // Leases of 6 s (three beats of 2 s): a claim committed on the old primary whose reply was lost comes back soon.
      const yaml = ['name: failover', 'tasks:',
        ...Array.from({ length: HTTP_TASKS / 4 }, (_, c) => [0, 1, 2, 3].map((j) =>
          `  h${c}_${j}: { type: w, ${j ? `depends_on: [h${c}_${j - 1}], ` : ''}spec: { constraints: { capabilities: [http-work], heartbeat_sec: 2 } } }`)).flat(),
        ...Array.from({ length: PROCESS_TASKS }, (_, i) => `  p${i}: { type: w, spec: { input: { ms: 150 }, constraints: { capabilities: [sleep], heartbeat_sec: 2 } } }`),
      ].join('\n');
      const submitted = await post('/api/dags', { yaml });
      expect(submitted.status, JSON.stringify(submitted.body)).toBe(201);
      const dagId = submitted.body.results[0].dagId as string;

      // The primary's host dies with about a third of the work done; the standby is promoted, the address moves.
      await eventually('a third done', async () => acknowledged.size >= HTTP_TASKS / 3, 60_000);
      const doneBefore = acknowledged.size;
      const killedAt = performance.now();
      pair.primaryKill();
      const promoteMs = await pair.promote();
      address.retarget(pair.standbyUrl);
      const movedAt = performance.now();
      await observer.close();
      observer = await databaseOpen({ url: pair.standbyUrl, poolSize: 2 });
      const db = observer.db;

      await eventually('the DAG completed on the new primary', async () => (await rowsOf<{ status: string }>(db, sql`
        select status from dags where id = ${dagId}`))[0]?.status === 'completed', 90_000);
      stopping = true;
      await Promise.all(loops);
      const firstAfter = completedAt.find((t) => t > movedAt);
      console.log(`failover: promotion ${promoteMs.toFixed(0)} ms; first HTTP completion ${((firstAfter! - movedAt) / 1000).toFixed(2)} s after the address moved, ${((firstAfter! - killedAt) / 1000).toFixed(2)} s after the kill; ${doneBefore} of ${HTTP_TASKS} HTTP tasks were done before`);

      expect((await rowsOf<{ r: boolean }>(db, sql`select pg_is_in_recovery() as r`))[0]!.r).toBe(false);
      // Nothing lost: every report the API acknowledged is the task's output on the new primary.
      const outputs = new Map((await rowsOf<{ id: string; output: unknown; status: string }>(db, sql`
        select id, output, status from tasks where dag_id = ${dagId}`)).map((t) => [t.id, t]));
      expect(outputs.size).toBe(HTTP_TASKS + PROCESS_TASKS);
      for (const [id, output] of acknowledged) expect(outputs.get(id)?.output, id).toEqual(output);
      expect([...outputs.values()].filter((t) => t.status !== 'completed')).toEqual([]);
      // Nothing twice: one completed attempt per task.
      expect(await rowsOf(db, sql`select task_id from attempts a join tasks t on t.id = a.task_id
        where t.dag_id = ${dagId} and a.outcome = 'completed' group by task_id having count(*) > 1`)).toEqual([]);
      // Both kinds of client went on without a restart, after the failover.
      expect(completedAt.some((t) => t > movedAt)).toBe(true);
      expect(node.exitCode).toBeNull();
      expect(runner.child.exitCode).toBeNull();
      const [byRunner] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from attempts a join tasks t on t.id = a.task_id
        where t.dag_id = ${dagId} and a.outcome = 'completed' and a.agent_id = 'sleeper-failover'`);
      expect(byRunner!.n).toBe(PROCESS_TASKS);
      const metrics = await (await fetch(`${base}/metrics`, { headers })).text();
      expect(Number(/^dagent_listener_reconnects_total (\d+)/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(1);
    } finally {
      node.kill('SIGTERM');
      await observer?.close();
    }
  }, 180_000);
});
