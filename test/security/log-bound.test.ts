import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { rowsOf } from '../helpers/factories.js';
import { serverStart } from './helpers/server.js';
import { httpAgent } from './helpers/agent.js';
import { innocentBystander } from './helpers/innocent.js';

/**
 * A release spends no attempt, so a per-attempt log allowance alone renewed at every claim: an agent looping claim,
 * 1,000 lines, release filed a fresh 1,000 each time. A task keeps at most logLinesPerTask lines (and
 * logBytesPerTask bytes) over all its attempts and releases; what comes past it is counted as dropped.
 */
const database = await testDatabase();
const { db } = database;
const PER_TASK = 2_500;
const server = await serverStart(database, { env: { DAGENT_LIMIT_LOG_LINES_PER_TASK: String(PER_TASK) } });

describe('a task\'s log', () => {
  it('keeps at most logLinesPerTask lines over rounds of claim, log and release; the rest are counted as dropped', async () => {
    const bystander = await innocentBystander(server, database, 'log-bound-bystander');
    const dagId = await server.submit('name: chatty\ntasks:\n  talk: { type: w, spec: { constraints: { capabilities: [chatty] } } }\n');
    const agent = await httpAgent(server, db, 'chatty-agent', { capabilities: ['chatty'] });
    let stored = 0;
    let dropped = 0;
    for (let round = 0; round < 4; round++) {
      const [t] = await agent.claim(dagId);
      expect(t!.key).toBe('talk');
      for (let batch = 0; batch < 2; batch++) {
        const lines = Array.from({ length: 500 }, (_, i) => ({ message: `round ${round} line ${batch * 500 + i}` }));
        const r = await server.call('POST', `/api/tasks/${t!.id}/logs`, { token: agent.token, body: { fence: t!.fence, lines } });
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        stored += r.body.stored;
        dropped += r.body.dropped;
      }
      const released = await server.call('POST', `/api/tasks/${t!.id}/release`, { token: agent.token, body: { fence: t!.fence } });
      expect(released.status, JSON.stringify(released.body)).toBe(200);
    }
    expect([stored, dropped]).toEqual([PER_TASK, 4_000 - PER_TASK]);
    const [kept] = await rowsOf<{ lines: number; attempts: number }>(db, sql`
      select count(*)::int as lines, (select attempts from tasks where dag_id = ${dagId}) as attempts
      from attempt_logs where task_id = (select id from tasks where dag_id = ${dagId})`);
    expect(kept).toEqual({ lines: PER_TASK, attempts: 0 });
    // The counts say so, per attempt: what a reader (dagent logs, the dashboard) shows as dropped.
    const counts = await rowsOf<{ lines: number; dropped: number }>(db, sql`
      select lines, dropped from attempt_log_stats where task_id = (select id from tasks where dag_id = ${dagId}) order by fence`);
    expect(counts).toEqual([{ lines: 1000, dropped: 0 }, { lines: 1000, dropped: 0 }, { lines: 500, dropped: 500 }, { lines: 0, dropped: 1000 }]);
    await bystander.finish();
  });
});
