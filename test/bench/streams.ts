/**
 * Streams (ctx.stream), writer to reader: an attempt's writer (the runtime's AttemptStreams) writes one JSON chunk
 * per write at a fixed rate, and a reader follows the stream through the node's StreamFeeds (what an SSE reader is
 * served from: a NOTIFY wakes one read, fanned out), timing each chunk from its write to its arrival. Statements
 * counted on the wire as completion-paths.ts does, writer's and reader's together, per second of the run.
 */
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import type { Database } from '../../src/db/handle.js';
import { dagSourceLoad } from '../../src/dag/load.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { AttemptStreams } from '../../src/runtime/attempt-streams.js';
import { StreamFeeds } from '../../src/http/stream-feeds.js';
import type { statementCounter } from './completion-paths.js';

export interface StreamFigures { rate: number; chunks: number; ms: number[]; statementsPerSec: number }

/** One stream per rate, written for `seconds` at `rate` chunks a second, read live by one reader. */
export async function streamsBench(d: Database, url: string, counter: ReturnType<typeof statementCounter>, rates: number[], seconds: number): Promise<StreamFigures[]> {
  const out: StreamFigures[] = [];
  const yaml = `name: streams\ntasks:\n${rates.map((_, i) => `  s${i}: { type: s }`).join('\n')}\n`;
  await dagSubmit(d.db, [await dagSourceLoad(yaml, 'streams.yaml')]);
  await agentRegister(d.db, { id: 'stream-agent', type: 'bench', capabilities: [], maxConcurrent: rates.length });
  const held = await taskClaim(d.db, 'stream-agent', { limit: rates.length, start: true });
  const feeds = new StreamFeeds({ db: d.db, databaseUrl: url });
  const log = pino({ level: 'silent' });
  try {
    for (const [i, rate] of rates.entries()) {
      const t = held[i]!;
      const ref = { taskId: t.id, fence: t.fence };
      const ms: number[] = [];
      let done!: () => void;
      const ended = new Promise<void>((r) => { done = r; });
      const { stop } = await feeds.follow({ ...ref, name: 'output' }, {
        after: 0,
        send: (chunks) => { for (const c of chunks) ms.push(performance.now() - (JSON.parse(c.data) as { t: number }).t); },
        end: () => done(),
      });
      const writer = new AttemptStreams(d.db, ref, log).open('output');
      const total = Math.round(rate * seconds);
      const { statements } = await counter.during(async () => {
        const t0 = performance.now();
        for (let n = 0; n < total; n++) {
          // On schedule: a write every 1/rate s, from the start (not drifting with the loop's own time).
          const due = t0 + (n * 1000) / rate;
          const wait = due - performance.now();
          if (wait > 1) await new Promise((r) => setTimeout(r, wait));
          writer.write({ t: performance.now(), n });
        }
        await writer.end();
        await ended;
      });
      stop();
      out.push({ rate, chunks: ms.length, ms, statementsPerSec: statements / seconds });
    }
  } finally {
    await feeds.close();
  }
  return out;
}
