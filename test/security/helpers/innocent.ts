import { expect } from 'vitest';
import { sql } from 'drizzle-orm';
import type { Database } from '../../../src/db/handle.js';
import { tokenCreate } from '../../../src/auth/tokens.js';
import type { ServerProcess } from './server.js';

/** An innocent DAG: a chain whose last task's output is validated by a JSON Schema. */
const INNOCENT = (name: string) => `
name: ${name}
tasks:
  fetch: { type: innocent, spec: { constraints: { capabilities: [innocent] }, input: { n: 1 } } }
  sum: { type: innocent, depends_on: [fetch], spec: { constraints: { capabilities: [innocent] }, context: [fetch] } }
  report:
    type: innocent
    depends_on: [sum]
    spec: { constraints: { capabilities: [innocent] }, context: [sum] }
    output: { validation: { kind: json-schema, schema: { type: object, required: [total] } } }
`;

/**
 * A DAG that runs beside an attack, with its own agent (its own token) over HTTP.
 * `start()` submits it before the attack; `finish()` works it to the end afterwards
 * and checks that the attack cost it nothing: every task completed on its first
 * attempt with the outputs its agent produced, and no dead letter.
 */
export async function innocentBystander(server: ServerProcess, database: Database, name: string) {
  const submitted = await server.call('POST', '/api/dags', { raw: INNOCENT(name), contentType: 'application/yaml' });
  expect(submitted.status, JSON.stringify(submitted.body)).toBe(201);
  const dagId: string = submitted.body.results[0].dagId;
  const agentId = `innocent-${name}`;
  const token = (await tokenCreate(database.db, { role: 'agent', agentId, capabilities: ['innocent'] })).token;
  return {
    dagId,
    async finish(): Promise<void> {
      const reg = await server.call('POST', '/api/agents', { token, body: { id: agentId, type: 'innocent', capabilities: ['innocent'] } });
      expect(reg.status, JSON.stringify(reg.body)).toBe(201);
      for (let done = 0; done < 3;) {
        const claim = await server.call('POST', `/api/agents/${agentId}/claim`, { token, body: { start: true, dag_id: dagId } });
        expect(claim.status, JSON.stringify(claim.body)).toBe(200);
        for (const t of claim.body.tasks as Array<{ id: string; key: string; fence: number; inputs: Record<string, any> }>) {
          const output = t.key === 'fetch' ? { n: 41 } : t.key === 'sum' ? { total: t.inputs.fetch.n + 1 } : { total: t.inputs.sum.total, ok: true };
          const c = await server.call('POST', `/api/tasks/${t.id}/complete`, { token, body: { fence: t.fence, output } });
          expect(c.status, JSON.stringify(c.body)).toBe(200);
          done++;
        }
        if (claim.body.tasks.length === 0) await new Promise((r) => setTimeout(r, 50));
      }
      const { rows } = await database.db.execute<{ key: string; status: string; attempts: number; output: unknown }>(
        sql`select key, status, attempts, output from tasks where dag_id = ${dagId} order by key`);
      expect(rows).toEqual([
        { key: 'fetch', status: 'completed', attempts: 1, output: { n: 41 } },
        { key: 'report', status: 'completed', attempts: 1, output: { total: 42, ok: true } },
        { key: 'sum', status: 'completed', attempts: 1, output: { total: 42 } },
      ]);
      const { rows: dead } = await database.db.execute<{ n: number }>(sql`select count(*)::int as n from dead_letters where dag_id = ${dagId}`);
      expect(dead[0]!.n).toBe(0);
      const { rows: dag } = await database.db.execute<{ status: string }>(sql`select status from dags where id = ${dagId}`);
      expect(dag[0]!.status).toBe('completed');
    },
  };
}
