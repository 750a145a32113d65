import { readdirSync } from 'node:fs';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { dagFileLoad } from '../../src/dag/load.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { edgeListForDag } from '../../src/db/queries/edges.js';
import { promoterCreate } from '../../src/maintenance/promoter.js';
import { signalSend } from '../../src/engine/waits/signals.js';
import { taskApprove } from '../../src/engine/waits/approvals.js';
import { mapTasksSettle } from '../../src/engine/dag/map.js';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, databaseReset, drain } from '../helpers/factories.js';
import { timePasses } from '../helpers/clock.js';
import { repoMake, scratchDir } from '../helpers/git-repos.js';

const { db } = await testDatabase();
beforeEach(() => databaseReset(db));

const dir = 'dags/examples';
const examples = readdirSync(dir).filter((f) => f.endsWith('.yaml'));
/** The coding fleet's repository: a git repository of this test's, inside the file roots it is loaded with. */
const fleetRepo = repoMake(path.join(scratchDir(), 'repo'));
const params: Record<string, Record<string, string>> = { 'code-change.yaml': { ticket: 'ENG-42' }, 'coding-fleet.yaml': { repo: fleetRepo, goal: 'Validate input' } };
const roots: Record<string, string[]> = { 'coding-fleet.yaml': [path.dirname(fleetRepo)] };
/** What an example's agents return where a later task relies on its shape (a for_each maps over the plan's files). */
const outputs: Record<string, Record<string, unknown>> = {
  'file-reviews.yaml': { plan: { files: ['src/api/users.ts', 'src/web/app.tsx', 'README.md'] } },
  'coding-fleet.yaml': { plan: { edits: [{ file: 'src/api.ts', instruction: 'validate' }, { file: 'README.md', instruction: 'document' }] } },
  // The comparison's output schema: a verdict.
  'research-two-providers.yaml': { compare: { better: 'tie', disagreements: [], summary: 'alike' } },
};

describe('example DAGs', () => {
  it('ships at least three', () => expect(examples.length).toBeGreaterThanOrEqual(3));

  it.each(examples)('%s runs to completion, every task after all of its upstream tasks', async (file) => {
    const spec = await dagFileLoad(path.join(dir, file), { params: params[file] ?? {}, roots: roots[file] });
    const [submitted] = await dagSubmit(db, [spec]);
    const dagId = submitted!.dagId;
    const capabilities = [...new Set(spec.tasks.flatMap((t) => t.requiredCapabilities))];
    const models = [...new Set(spec.tasks.flatMap((t) => [...t.body.models, ...t.body.fallbackModels]))];
    const agentId = await agentCreate(db, `all-${file}`, capabilities, undefined, { models });
    // Not-before delays are part of some examples: wait for them by draining until the DAG is done.
    const order: string[] = [];
    for (let i = 0; i < 100 && (await dagGet(db, dagId))?.status === 'running'; i++) {
      order.push(...(await drain(db, agentId, (k) => outputs[file]?.[k] ?? { by: agentId, key: k })));
      // A for_each task: the waits loop maps it (its children are drained next) and then completes it.
      const mapped = await db.query.tasks.findMany({ where: (t, { and, eq, like }) => and(eq(t.dagId, dagId), eq(t.status, 'waiting'), like(t.waitKey, 'map/%')) });
      if (mapped.length) {
        await mapTasksSettle(db, { batch: 100 });
        for (const m of mapped) if ((await db.query.tasks.findFirst({ where: (t, { eq }) => eq(t.id, m.id) }))!.status === 'completed') order.push(m.key);
        continue;
      }
      // A task that waits for a signal: send it, as the outside system would, and count it done in order.
      const waiting = await db.query.tasks.findMany({ where: (t, { and, eq }) => and(eq(t.dagId, dagId), eq(t.status, 'waiting')) });
      for (const w of waiting) {
        // An approval step's validation task waits for a person: approve what it judges.
        if (w.validatesId) {
          expect((await taskApprove(db, w.validatesId, { by: 'test' })).outcome.status).toBe('completed');
          continue;
        }
        // An approval task waits for a person too: approve it.
        if (w.waitKey!.startsWith('approval/')) {
          expect((await taskApprove(db, w.id, { by: 'test' })).outcome.status).toBe('completed');
          order.push(w.key);
          continue;
        }
        const sent = await signalSend(db, w.waitKey!, { passed: true });
        expect(sent.completed.map((t) => t.id)).toEqual([w.id]);
        order.push(w.key);
      }
      if ((await dagGet(db, dagId))?.status === 'running') {
        await timePasses(db, 100);
        await promoterCreate({ db }).runOnce();
      }
    }
    expect((await dagGet(db, dagId))?.status).toBe('completed');
    // A for_each's children (key/0, key/1, …) ran too, one per item; the rest ran once each.
    const mapKeys = new Set(spec.tasks.filter((t) => t.forEach).map((t) => t.key));
    const children = order.filter((k) => mapKeys.has(k.split('/')[0]!) && /\/\d+$/.test(k));
    for (const t of spec.tasks.filter((x) => x.forEach)) {
      const [from, ...at] = 'over' in t.forEach! ? t.forEach.over.split('.') : [];
      const list = 'items' in t.forEach! ? t.forEach.items : at.reduce((v, f) => (v as Record<string, unknown>)[f], outputs[file]?.[from!]) as unknown[];
      const n = list.length;
      expect(children.filter((k) => k.startsWith(`${t.key}/`)).length, t.key).toBe(n);
    }
    expect(order.filter((k) => !children.includes(k)).sort()).toEqual(spec.tasks.map((t) => t.key).sort());

    const position = new Map<string, number>();
    const completionOrder = await db.query.attempts.findMany({ where: (a, { eq }) => eq(a.dagId, dagId), orderBy: (a, { asc }) => [asc(a.endedAt)] });
    const keyOf = new Map((await db.query.tasks.findMany({ where: (t, { eq }) => eq(t.dagId, dagId) })).map((t) => [t.id, t.key]));
    completionOrder.forEach((a, i) => position.set(keyOf.get(a.taskId)!, i));
    // The DAG's own edges, and one from each for_each child to its task.
    const edges = await edgeListForDag(db, dagId);
    expect(edges.length).toBe(spec.tasks.reduce((n, t) => n + t.dependsOn.length, 0) + children.length);
    for (const e of edges) expect(position.get(e.upstreamKey)!).toBeLessThan(position.get(e.downstreamKey)!);
  });
});
