import { describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { sql } from 'drizzle-orm';
import { dagRunAll, PAIR_YAML } from '../helpers/rerun-pair.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { tokenCreate } from '../../src/auth/tokens.js';

/** A rerun with a change over HTTP (POST /api/dags/:id/reruns) and two runs compared (GET /api/dags/:id/compare/:other). */
const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const { call } = http;

const token = async (role: 'submit' | 'read') => (await tokenCreate(db, { role, name: role })).token;

await agentRegister(db, { id: 'w', type: 'test', capabilities: ['tool'], models: ['*'], maxConcurrent: 100 });
const first = await dagCreate(db, PAIR_YAML);
await dagRunAll(db, 'w', first, {
  output: (k, m) => (k === 'gather' ? { facts: [1, 2] } : `${k} report by ${m}`),
  spend: (k) => (k === 'gather' ? undefined : { costUsd: 0.5, tokensIn: 1000, tokensOut: 200 }),
});

describe('POST /api/dags/:id/reruns', () => {
  it('creates the rerun as a new DAG (201), whose graph says what it re-ran and changed; the original lists it', async () => {
    const r = await call('POST', `/api/dags/${first}/reruns`, { token: await token('submit'), body: { model: 'model-b', set: { 'polish.prompt': 'Polish it' }, note: 'try b' } });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ rerunOf: first, name: 'report', tasks: 3, rerun: ['draft', 'polish'], reused: ['gather'] });
    expect(r.body.change).toMatchObject({ model: 'model-b', set: [{ task: 'polish', field: 'prompt', value: 'Polish it' }], changed: ['draft', 'polish'], note: 'try b' });
    expect(r.body.change.by).toMatch(/^submit:tok_/);

    const graph = (await call('GET', `/api/dags/${r.body.dagId}`)).body;
    expect([graph.dag.rerunOf, graph.dag.rerunChange.rerunTasks, graph.dag.rerunChange.reusedTasks]).toEqual([first, 2, 1]);
    const gather = graph.nodes.find((n: { key: string }) => n.key === 'gather');
    expect([gather.status, gather.reusedFrom, gather.costUsd]).toEqual(['completed', expect.stringMatching(/^tsk_/), 0]);
    const original = (await call('GET', `/api/dags/${first}`)).body;
    expect(original.reruns.map((x: { id: string }) => x.id)).toEqual([r.body.dagId]);
    expect(original.dag.rerunOf).toBeNull();
  });

  it('an agent or read token is refused (403); a bad field or model is 400 naming it; an unfinished DAG 409; an unknown one 404; no DAG created', async () => {
    const agent = await http.agentToken('w', ['tool']);
    const open = await dagCreate(db, PAIR_YAML);
    const dags = async () => (await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from dags`))[0]!.n;
    const before = await dags();
    const cases: Array<[string | undefined, string, unknown, number, RegExp]> = [
      [agent, first, { model: 'model-b' }, 403, /needs a token with role admin or submit/],
      [await token('read'), first, { model: 'model-b' }, 403, /role read/],
      [undefined, first, { model: 'model b' }, 400, /model/],
      [undefined, first, { set: { 'draft.promt': 'x' } }, 400, /^set draft\.promt: unknown field promt \(did you mean "prompt"\?\)/],
      [undefined, first, { set: { 'constraints.max_tokens': 'many' } }, 400, /^set constraints\.max_tokens: .*expected number/i],
      [undefined, first, {}, 400, /a rerun needs a change/],
      // Its LLM tasks run on model-a alone already.
      [undefined, first, { model: 'model-a' }, 400, /^nothing would change/],
      [undefined, open, { model: 'model-b' }, 409, /is running: only a finished DAG/],
      [undefined, 'dag_doesnotexist00', { model: 'model-b' }, 404, /DAG dag_doesnotexist00 not found/],
    ];
    for (const [who, dagId, body, status, message] of cases) {
      const r = await call('POST', `/api/dags/${dagId}/reruns`, { token: who, body });
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect(r.body.error.message, JSON.stringify(body)).toMatch(message);
    }
    expect(await dags()).toBe(before);
  });
});

describe('GET /api/dags/:id/compare/:other', () => {
  it('sets each task beside its rerun: outputs (cut to output_chars), verdicts, cost (unknown as null), tokens, time, attempts, totals', async () => {
    const r = await call('POST', `/api/dags/${first}/reruns`, { body: { model: 'model-c' } });
    expect(r.status).toBe(201);
    const rerun: string = r.body.dagId;
    await dagRunAll(db, 'w', rerun, {
      output: (k, m) => `${k} report by ${m}`,
      spend: (k) => (k === 'draft' ? { costUsd: null, tokensIn: 300, tokensOut: 100 } : { costUsd: 0.25, tokensIn: 500, tokensOut: 50 }),
    });
    const c = await call('GET', `/api/dags/${first}/compare/${rerun}?output_chars=12`, { token: await token('read') });
    expect(c.status).toBe(200);
    // As dagent status lists them: by creation, then key.
    expect(c.body.tasks.map((t: { key: string }) => t.key)).toEqual(['draft', 'gather', 'polish']);
    const [draft, gather, polish] = c.body.tasks;
    expect(gather.sameOutput).toBe(true);
    expect(gather.b).toMatchObject({ reusedFrom: gather.a.taskId, costUsd: 0, tokensIn: 0, attempts: 0, durationMs: null });
    expect(draft.a).toMatchObject({ model: 'model-a', outputText: 'draft report', outputLength: 'draft report by model-a'.length, outputTruncated: true, costUsd: 0.5, tokensIn: 1000, tokensOut: 200, attempts: 1 });
    expect(draft.a.verdicts).toEqual([expect.objectContaining({ kind: 'regex', pass: true })]);
    expect(draft.b).toMatchObject({ model: 'model-c', costUsd: null, tokensIn: 300, tokensOut: 100, attempts: 1 });
    expect(draft.a.durationMs).toEqual(expect.any(Number));
    expect(polish.sameOutput).toBe(false);
    expect(c.body.a.totals).toMatchObject({ tasks: 3, completed: 3, reused: 0, costUsd: 1, costUnknownTasks: 0, tokensIn: 2000, tokensOut: 400, attempts: 3, verdicts: 1, verdictsPassed: 1 });
    expect(c.body.b.totals).toMatchObject({ tasks: 3, reused: 1, costUsd: 0.25, costUnknownTasks: 1, tokensIn: 800, attempts: 2 });
    expect([c.body.b.rerunOf, c.body.b.rerunChange.model, c.body.outputsDiffering]).toEqual([first, 'model-c', 2]);

    expect((await call('GET', `/api/dags/${first}/compare/${rerun}`, { token: await http.agentToken('w', ['tool']) })).status).toBe(403);
    expect((await call('GET', `/api/dags/${first}/compare/dag_doesnotexist00`)).status).toBe(404);
    const bad = await call('GET', `/api/dags/${first}/compare/${rerun}?output_chars=-1`);
    expect([bad.status, bad.body.error.message]).toEqual([400, expect.stringMatching(/output_chars/)]);
  });
});
