import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { testDatabase } from '../helpers/db.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { ReadyListener, listenerReconnectsTotal, listenersDown } from '../../src/db/ready-listener.js';
import { MetricsCollector } from '../../src/observability/metrics.js';
import { faultProxy } from './helpers/proxy.js';

// A half-open LISTEN connection (the network drops without a reset) was never noticed: agents
// fell back to polling for good. Now the listener pings itself; an unanswered ping drops the
// connection and it is made again within seconds, waking everyone.
const database = await testDatabase();
const { db } = database;
// On the LISTEN connection's way: DATABASE_DIRECT_URL's when the database is reached through a pooler.
const proxy = await faultProxy(database.sessionUrl);
const agentProcess = database.sessionUrl === database.url ? agentProcesses(proxy.url) : agentProcesses(database.url, proxy.url);

/**
 * The listeners this file makes itself ping every 0.5 s and give a ping or a statement up after 1 s and 2 s, not
 * LISTENER_DEFAULTS' 2, 3 and 5 s: what they check is that a half-open connection is found and made again, not how
 * soon. The agent process's listener keeps the defaults (its "within seconds" is theirs).
 */
const STATEMENT_TIMEOUT_MS = 2_000;
const quick = { healthIntervalMs: 500, healthTimeoutMs: 1_000, statementTimeoutMs: STATEMENT_TIMEOUT_MS };

describe('a half-open LISTEN connection', () => {
  it('is found by the health check and made again; subscribers are woken and the reconnect is counted', async () => {
    const listener = new ReadyListener({ url: proxy.url, log: pino({ level: 'silent' }), ...quick });
    const metrics = new MetricsCollector(db);
    let wakes = 0;
    listener.subscribe(() => { wakes++; });
    await listener.start();
    try {
      const before = listenerReconnectsTotal();
      const wakesBefore = wakes;
      proxy.freezeListening();
      await eventually('reconnected', async () => listenerReconnectsTotal() > before, 15_000);
      expect(wakes).toBeGreaterThan(wakesBefore);
      expect(listener.listening).toBe(true);
      expect(await metrics.metrics()).toMatch(/^dagent_listener_reconnects_total [1-9]/m);
    } finally {
      metrics.close();
      await listener.stop();
    }
  });

  it('an idle agent process (no polling) whose LISTEN connection goes half-open still claims new work within seconds', async () => {
    const agent = await agentProcess('test/fixtures/agents/alpha.ts', 'half-open', ['--poll-ms', '600000']);
    await eventually('the agent listens', async () => (await rowsOf<{ n: number }>(db, sql`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name like 'dagent-listener%'`))[0]!.n >= 1);
    proxy.freezeListening();
    const dagId = await dagCreate(db, 'name: half-open\ntasks:\n  a: { type: t, spec: { constraints: { capabilities: [alpha] } } }\n');
    await eventually('completed', async () => (await rowsOf<{ status: string }>(db, sql`select status from tasks where dag_id = ${dagId}`))[0]!.status === 'completed', 15_000)
      .catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
    expect(agent.output()).toMatch(/no answer to its health-check ping/);
  });

  it('a reconnect whose LISTEN is never answered is given up and made again: the node is back on LISTEN once the network lets it, and says so meanwhile', async () => {
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => { lines.push(l); } });
    const listener = new ReadyListener({ url: proxy.url, log, ...quick });
    const metrics = new MetricsCollector(db);
    await listener.start();
    try {
      expect(listener.listening).toBe(true);
      const before = listenerReconnectsTotal();
      // The connection goes half-open, and every LISTEN of the reconnects is swallowed.
      proxy.swallowListens(true);
      proxy.freezeListening();
      await eventually('the listener is down', async () => !listener.listening, 15_000);
      expect(listenersDown()).toBeGreaterThanOrEqual(1);
      expect(await metrics.metrics()).toMatch(/^dagent_listener_down [1-9]/m);
      // At least one reconnect's LISTEN was given up, not waited on for ever.
      await eventually('a swallowed LISTEN given up', async () => lines.some((l) => /lost its connection; reconnecting/.test(l) && /timeout/i.test(l)),
        STATEMENT_TIMEOUT_MS * 3);
      expect(listener.listening).toBe(false);
      proxy.swallowListens(false);
      await eventually('back on LISTEN', async () => listener.listening && listenerReconnectsTotal() > before, STATEMENT_TIMEOUT_MS * 3);
      expect(await metrics.metrics()).toMatch(/^dagent_listener_down 0/m);
    } finally {
      proxy.swallowListens(false);
      metrics.close();
      await listener.stop();
    }
  }, 60_000);
});
