/**
 * A large DAG's submit for `npm run bench`: how long one transaction takes to insert a DAG of `tasks` tasks with its
 * cycle check and critical-path ranks, and what it costs a claimer beside it: claim of 1 from a live DAG, timed
 * while the submit runs and without it; in the same process (a node serving the API and agents at once), then in a
 * process of its own (an agent on another node: large-dag-claimer.ts).
 */
import { fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import type { Database, Db } from '../../src/db/handle.js';
import type { TaskSpec } from '../../src/dag/spec.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { textArray } from '../../src/db/statement.js';

export interface LargeDagFigures {
  tasks: number;
  edges: number;
  /** Each submit's seconds. */
  submitSec: number[];
  claimsDuring: number[];
  claimsIdle: number[];
  /** The claimer in a process of its own, during as many submits again. */
  otherProcessSubmitSec: number[];
  claimsDuringOtherProcess: number[];
}

/** The claimer's step, here and in its own process: claim one task of the live DAGs, time it into `into`, finish it. */
export async function liveClaim(db: Db, agentId: string, into?: number[]): Promise<void> {
  const t0 = performance.now();
  const got = await taskClaim(db, agentId, { limit: 1, capabilities: ['live'] });
  into?.push(performance.now() - t0);
  if (got.length !== 1) throw new Error('the live DAG ran out of READY tasks');
  await db.execute(sql`update tasks set status = 'completed', completed_at = now() where id = any(${textArray(got.map((t) => t.id))})`);
}

const CLAIMER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'large-dag-claimer.ts');

/** Run `submitAll` while a claimer in its own process claims beside it; its claims' times in ms. */
async function beside(url: string, agentId: string, submitAll: () => Promise<void>): Promise<number[]> {
  const child = fork(CLAIMER, [url, agentId], { execArgv: ['--import', 'tsx'] });
  const messages: string[] = [];
  let wake: (() => void) | undefined;
  child.on('message', (m) => { messages.push(String(m)); wake?.(); });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => { resolve(code); wake?.(); }));
  const next = async (): Promise<string> => {
    while (!messages.length) {
      if (child.exitCode !== null) throw new Error(`the claimer exited (${child.exitCode})`);
      await new Promise<void>((resolve) => { wake = resolve; });
    }
    return messages.shift()!;
  };
  try {
    await next();
    child.send('go');
    await submitAll();
    child.send('stop');
    const ms = JSON.parse(await next()) as number[];
    // The IPC channel would keep the claimer alive once it is done.
    child.disconnect();
    await exited;
    return ms;
  } finally {
    // A submit that failed leaves the claimer claiming: stop it, or the bench never exits.
    if (child.exitCode === null) child.kill();
  }
}

/**
 * `layers` layers of `tasks / layers` tasks; from the second layer on, each task depends on two of the layer before
 * (its own column and the next), so the graph has ~2 edges per task and the cycle check walks all of them.
 */
function layeredDag(tasks: number, layers: number, task: (key: string, dependsOn?: string[]) => TaskSpec): TaskSpec[] {
  const width = tasks / layers;
  return Array.from({ length: tasks }, (_, i) => {
    const [l, c] = [Math.floor(i / width), i % width];
    // A capability the claimer lacks: it claims from the live DAG only.
    return { ...task(`l${l}-${c}`, l === 0 ? [] : [`l${l - 1}-${c}`, `l${l - 1}-${(c + 1) % width}`]), requiredCapabilities: ['big'] };
  });
}

export async function largeDagBench(
  d: Database, url: string, tasks: number, submits: number, task: (key: string, dependsOn?: string[]) => TaskSpec,
): Promise<LargeDagFigures> {
  for (let i = 0; i < 4; i++) {
    await dagSubmit(d.db, [{ name: `live-${i}`, params: {}, tasks: Array.from({ length: 5000 }, (_, j) => ({ ...task(`t${j}`), requiredCapabilities: ['live'] })) }]);
  }
  await d.db.execute(sql`vacuum analyze tasks`);
  await agentRegister(d.db, { id: 'claimer-large-dag', type: 'bench', capabilities: ['live'], maxConcurrent: 1 });
  await agentRegister(d.db, { id: 'claimer-large-dag-other', type: 'bench', capabilities: ['live'], maxConcurrent: 1 });
  const claimOnce = (into: number[]) => liveClaim(d.db, 'claimer-large-dag', into);
  const claimsIdle: number[] = [];
  for (let i = 0; i < 500; i++) await claimOnce(claimsIdle);

  const spec = layeredDag(tasks, 10, task);
  const claimsDuring: number[] = [];
  const submitSec: number[] = [];
  for (let s = 0; s < submits; s++) {
    let submitting = true;
    const t0 = performance.now();
    const submitted = dagSubmit(d.db, [{ name: `large-${s}`, params: {}, tasks: spec }]).finally(() => { submitting = false; });
    while (submitting) await claimOnce(claimsDuring);
    await submitted;
    submitSec.push((performance.now() - t0) / 1000);
  }
  const otherProcessSubmitSec: number[] = [];
  const claimsDuringOtherProcess = await beside(url, 'claimer-large-dag-other', async () => {
    for (let s = 0; s < submits; s++) {
      const t0 = performance.now();
      await dagSubmit(d.db, [{ name: `large-other-${s}`, params: {}, tasks: spec }]);
      otherProcessSubmitSec.push((performance.now() - t0) / 1000);
    }
  });
  return {
    tasks, edges: spec.reduce((n, t) => n + t.dependsOn.length, 0), submitSec, claimsDuring, claimsIdle, otherProcessSubmitSec, claimsDuringOtherProcess,
  };
}
