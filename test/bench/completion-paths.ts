/**
 * The completion's other paths, timed one report at a time through the public API's taskComplete: a completion
 * refused for a stale fence (LEASE_LOST), the same completion made again (a replay: its reply was lost), and an
 * output settled through an inline validation step. Each path's statements are counted on the wire (BEGIN, COMMIT
 * and ROLLBACK left out): the refusal is answered by the completion statement itself, where it took up to three
 * reads more before. Uses only what src/index.ts exports, so the same file runs against an older checkout.
 */
import pg from 'pg';
import { performance } from 'node:perf_hooks';
import { agentRegister, dagSourceLoad, dagSubmit, taskClaim, taskComplete, type Database } from '../../src/index.js';

export interface PathFigures { name: string; p50Ms: number; p90Ms: number; statements: number }

/** Counts the statements sent while `on` is set; wraps the driver before any pool connects (they bind query then). */
export function statementCounter(): { during<T>(fn: () => Promise<T>): Promise<{ result: T; statements: number }> } {
  let counting: { n: number } | null = null;
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const q = args[0] as string | { text?: string } | undefined;
    const text = typeof q === 'string' ? q : q?.text ?? '';
    if (counting && !/^\s*(begin|commit|rollback)\b/i.test(text)) counting.n++;
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof query;
  return {
    async during(fn) {
      const c = { n: 0 };
      counting = c;
      try {
        return { result: await fn(), statements: c.n };
      } finally {
        counting = null;
      }
    },
  };
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

/** `n` reports of each path on `d` (its pool opened after `counter` was made). */
export async function completionPathsBench(d: Database, counter: ReturnType<typeof statementCounter>, n: number): Promise<PathFigures[]> {
  const tasks = Array.from({ length: n }, (_, i) => `  t${i}: { type: plain }`).join('\n');
  const checked = Array.from({ length: n }, (_, i) => `  v${i}: { type: checked, output: { validation: { kind: regex, pattern: "^ok$" } } }`).join('\n');
  await dagSubmit(d.db, [await dagSourceLoad(`name: paths\ntasks:\n${tasks}\n${checked}\n`, 'paths.yaml')]);
  await agentRegister(d.db, { id: 'paths-agent', type: 'bench', capabilities: [], maxConcurrent: 2 * n });
  const held = await taskClaim(d.db, 'paths-agent', { limit: 2 * n });
  const plain = held.filter((t) => t.type === 'plain');
  const validated = held.filter((t) => t.type === 'checked');
  const timed = async (name: string, each: (i: number) => Promise<unknown>): Promise<PathFigures> => {
    const ms: number[] = [];
    let statements = 0;
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const r = await counter.during(() => each(i).catch((e: unknown) => e));
      ms.push(performance.now() - t0);
      statements += r.statements;
    }
    return { name, p50Ms: pct(ms, 50), p90Ms: pct(ms, 90), statements: statements / n };
  };
  const figures = [
    await timed('completed', (i) => taskComplete(d.db, { taskId: plain[i]!.id, fence: plain[i]!.fence, output: { i } })),
    await timed('replayed (the same completion again)', (i) => taskComplete(d.db, { taskId: plain[i]!.id, fence: plain[i]!.fence, output: { i } })),
    await timed('refused (a stale fence: LEASE_LOST)', (i) => taskComplete(d.db, { taskId: plain[i]!.id, fence: plain[i]!.fence + 1, output: { i } })),
    await timed('validated (one inline regex step)', (i) => taskComplete(d.db, { taskId: validated[i]!.id, fence: validated[i]!.fence, output: 'ok' })),
  ];
  return figures;
}
