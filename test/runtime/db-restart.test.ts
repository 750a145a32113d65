import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { databaseOpen } from '../../src/db/open.js';
import type { Database } from '../../src/db/handle.js';
import { embeddedServerStart, type EmbeddedServer } from '../../src/db/embedded.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { AgentRunner } from '../../src/runtime/agent-runner.js';
import { defineAgent } from '../../src/runtime/define-agent.js';
import { dagCreate, taskStatusByKey } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';

// This file restarts its own embedded server, whatever DATABASE_URL says: restarting is the point.
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-restart-'));
chmodSync(dataDir, 0o755);
let server: EmbeddedServer;
let database: Database;
const logLines: string[] = [];
const log = pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) });
const logged = (msg: string) => logLines.some((l) => (JSON.parse(l) as { msg: string }).msg.includes(msg));

beforeAll(async () => {
  server = await embeddedServerStart({ dataDir, database: 'restart', ephemeral: true });
  database = await databaseOpen({ url: server.url });
});
afterAll(async () => {
  await database?.close();
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function restart(whileDown: () => Promise<void> = async () => {}): Promise<void> {
  await server.stop();
  await whileDown();
  const again = await embeddedServerStart({ dataDir, database: 'restart', ephemeral: true });
  expect(again.owned).toBe(true); // a new server, not the old one still shutting down
  expect(again.url).toBe(server.url); // same port: clients reconnect to where they were
  server = again;
}

describe('database restart', () => {
  it('an idle agent reconnects, listens again and is woken by a notification after the restart', async () => {
    const r = new AgentRunner(defineAgent({ name: 'idle', capabilities: [], async run() { return 'ok'; } }), { database, log, pollIntervalMs: 30_000 });
    const { engineEvents } = await import('../../src/observability/engine-events.js');
    let claims = 0;
    const counted = () => { claims++; };
    engineEvents.on('claim', counted);
    await r.start();
    try {
      await restart(() => new Promise((res) => setTimeout(res, 500)));
      const before = claims;
      await eventually('listener reconnected', async () => logged('ready listener reconnected'));
      // The reconnect wakes every waiting claim once (what became READY meanwhile notified nobody): its claim finds
      // nothing, and the loop settles into its 30 s wait.
      await eventually('the claim after the reconnect', async () => claims > before);
      const dagId = await dagCreate(database.db, 'name: after\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');
      // With a 30 s poll, finishing within seconds means a notification on the new connection woke it.
      await eventually('DAG completed', async () => (await dagGet(database.db, dagId))?.status === 'completed', 10_000);
    } finally {
      engineEvents.off('claim', counted);
      await r.stop({ graceMs: 0 });
    }
  });

  it('an agent whose task finishes while the database is down delivers the result once it is back', async () => {
    let finish!: () => void;
    const gate = new Promise<void>((res) => (finish = res));
    const r = new AgentRunner(defineAgent({ name: 'busy', capabilities: [], async run(task) { if (task.key === 'a') await gate; return { key: task.key }; } }), { database, log, pollIntervalMs: 500 });
    const dagId = await dagCreate(database.db, 'name: during\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');
    await r.start();
    try {
      await eventually('a running', async () => (await taskStatusByKey(database.db, dagId)).a === 'running');
      await restart(async () => {
        finish(); // the handler returns while nothing can be written
        await new Promise((res) => setTimeout(res, 700));
      });
      await eventually('DAG completed', async () => (await dagGet(database.db, dagId).catch(() => undefined))?.status === 'completed', 30_000);
      expect(await taskStatusByKey(database.db, dagId)).toEqual({ a: 'completed', b: 'completed' });
      expect(logged('complete: database unreachable, retrying')).toBe(true);
    } finally {
      await r.stop({ graceMs: 0 });
    }
  });
});
