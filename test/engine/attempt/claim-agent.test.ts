import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { NotFoundError } from '../../../src/errors.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, rowsOf } from '../../helpers/factories.js';

const { db } = await testDatabase();

// The runtime claims with its capabilities, so the claim never reads the agent row first: what the claim statement
// saw of it says whether an empty claim is an unknown agent (an error) or nothing to do.
describe('a claim that finds nothing, made with the agent\'s capabilities', () => {
  beforeEach(() => databaseReset(db));

  it('is an error for an agent that does not exist, and nothing for one that exists', async () => {
    await expect(taskClaim(db, 'ghost', { limit: 5, capabilities: [] })).rejects.toBeInstanceOf(NotFoundError);
    const a = await agentCreate(db, 'claim-empty');
    expect(await taskClaim(db, a, { limit: 5, capabilities: [] })).toEqual([]);
  });

  it('is nothing, not an error, for an agent that exists and is not active; READY work stays READY', async () => {
    const a = await agentCreate(db, 'claim-offline');
    const dagId = await dagCreate(db, 'name: one\ntasks:\n  t: { type: t }\n');
    await db.execute(sql`update agents set status = 'offline' where id = ${a}`);
    expect(await taskClaim(db, a, { limit: 5, capabilities: [] })).toEqual([]);
    const [t] = await rowsOf<{ status: string }>(db, sql`select status from tasks where dag_id = ${dagId}`);
    expect(t!.status).toBe('ready');
    await db.execute(sql`update agents set status = 'active' where id = ${a}`);
    expect((await taskClaim(db, a, { limit: 5, capabilities: [] })).map((c) => c.key)).toEqual(['t']);
  });
});
