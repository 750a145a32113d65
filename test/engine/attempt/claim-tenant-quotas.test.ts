import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { dagSubmit } from '../../../src/engine/dag/submit.js';
import { tenantCreate, tenantSet, tenantShares } from '../../../src/engine/ops/tenants.js';
import { tenantShareCreate } from '../../../src/maintenance/tenant-share.js';
import { budgetWatchCreate } from '../../../src/maintenance/budget-watch.js';
import { dagGet } from '../../../src/db/queries/dags.js';
import { statsGet } from '../../../src/engine/read/inspect.js';
import { unclaimableList } from '../../../src/engine/ops/priority.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagSpec, databaseReset, rowsOf } from '../../helpers/factories.js';

// Quotas in money and in tokens: past one, the share loop marks the tenant, and claims pass its work over (its
// reason shown) while the other tenant's work goes on; a quota raised, or its day or minute over, lets it go again.
const database = await testDatabase();
const { db } = database;
const loop = tenantShareCreate({ db });
const budgetWatch = budgetWatchCreate({ db });
const dagState = async (id: string) => { const d = (await dagGet(db, id))!; return [d.status, d.blockedReason]; };
const blockEvents = async (id: string) => (await rowsOf<{ type: string; reason: string | null }>(db, sql`
  select type, data->>'reason' as reason from events where dag_id = ${id} and type in ('dag.blocked', 'dag.resumed') order by id`)).map((e) => [e.type, e.reason]);

beforeEach(async () => {
  await databaseReset(db);
  await tenantCreate(db, { id: 'team-a' });
  await tenantCreate(db, { id: 'team-b' });
  await agentCreate(db, 'w');
});

async function submit(tenant: string, n: number, tokens = 1000): Promise<string> {
  const tasks = Array.from({ length: n }, (_, i) => `  t${i}: { type: t, spec: { constraints: { estimated_tokens: ${tokens} } } }`).join('\n');
  const [r] = await dagSubmit(db, [await dagSpec(`name: ${tenant}-${n}\ntasks:\n${tasks}\n`)], { tenant });
  return r!.dagId;
}
const tenantsOf = async (ids: string[]) => (await rowsOf<{ tenant_id: string }>(db, sql`
  select tenant_id from tasks where id = any(string_to_array(${ids.join(',')}, ','))`)).map((r) => r.tenant_id).sort();
const waitingOf = async (id: string) => (await tenantShares(db)).find((t) => t.id === id)!.waiting;

describe('a tenant\'s money and tokens quotas', () => {
  it('USD per day: past it (spent today, and reserved), its work waits with the reason while the other\'s goes on; raised, it goes', async () => {
    const dagA = await submit('team-a', 3);
    await tenantSet(db, 'team-a', { maxUsdPerDay: 1 });
    // The first task of team-a spends 1.2 USD today: more than its day's quota.
    const [first] = await taskClaim(db, 'w', { limit: 1 });
    expect(await tenantsOf([first!.id])).toEqual(['team-a']);
    await taskComplete(db, { taskId: first!.id, fence: first!.fence, output: 1, costUsd: 1.2 });
    expect(await loop.runOnce()).toBeGreaterThanOrEqual(1);
    expect(await waitingOf('team-a')).toMatch(/^USD quota: 1\.2\d* of 1 USD spent or reserved today/);
    const until = (await rowsOf<{ next_day: boolean }>(db, sql`
      select quota_until = ((now() at time zone 'utc')::date + 1)::timestamp at time zone 'utc' as next_day from tenants where id = 'team-a'`))[0]!;
    expect(until.next_day).toBe(true);

    const dagB = await submit('team-b', 2);
    // Its DAG, with work waiting, is blocked with the reason (the budget watch's pass); the other tenant's runs.
    expect(await budgetWatch.runOnce()).toBe(1);
    expect(await dagState(dagA)).toEqual(['blocked', 'tenant quota: tenant team-a spent or reserved its USD quota for today (UTC); its tasks wait for the next day or a higher quota']);
    expect(await blockEvents(dagA)).toEqual([['dag.blocked', 'tenant_quota']]);
    expect(await dagState(dagB)).toEqual(['running', null]);
    const meanwhile = await taskClaim(db, 'w', { limit: 10 });
    expect(await tenantsOf(meanwhile.map((t) => t.id))).toEqual(['team-b', 'team-b']);
    expect((await statsGet(db, { tenant: 'team-a' })).tenants[0]!.waiting).toMatch(/USD quota/);
    // Its READY tasks say why no agent takes them (dagent tasks --unclaimable).
    const stuck = await unclaimableList(db);
    expect(stuck.map((t) => [t.key, t.reason])).toEqual(['t0', 't1', 't2'].filter((k) => k !== first!.key).map((k) => [k, 'tenant_quota']));
    expect(stuck[0]!.detail).toMatch(/^tenant team-a waits at its USD quota: 1\.2\d* of 1 USD/);

    await tenantSet(db, 'team-a', { maxUsdPerDay: 5 });
    await loop.runOnce();
    expect(await waitingOf('team-a')).toBeNull();
    await budgetWatch.runOnce();
    expect(await dagState(dagA)).toEqual(['running', null]);
    expect(await blockEvents(dagA)).toEqual([['dag.blocked', 'tenant_quota'], ['dag.resumed', null]]);
    const after = await taskClaim(db, 'w', { limit: 10 });
    expect(await tenantsOf(after.map((t) => t.id))).toEqual(['team-a', 'team-a']);
  });

  it('tokens per minute: the estimated tokens claimed this minute; past it its work waits for the minute to end', async () => {
    const dagA = await submit('team-a', 6, 1000);
    await submit('team-b', 2, 1000);
    await tenantSet(db, 'team-a', { maxTokensPerMinute: 2000 });
    const agentA = 'only-a';
    await agentCreate(db, agentA);
    await db.execute(sql`update agents set tenants = array['team-a'] where id = ${agentA}`);
    const firsts = await taskClaim(db, agentA, { limit: 2 });
    expect(firsts).toHaveLength(2);
    await loop.runOnce();
    expect(await waitingOf('team-a')).toBe('tokens quota: 2000 of 2000 tokens claimed this minute; its work waits for the minute to end');
    expect(await taskClaim(db, agentA, { limit: 10 })).toEqual([]);
    // A wait that ends within its minute is a throttle, like a model's rate limit: it blocks no DAG.
    await budgetWatch.runOnce();
    expect(await dagState(dagA)).toEqual(['running', null]);
    // The other tenant is not held back.
    const other = await taskClaim(db, 'w', { limit: 10 });
    expect(await tenantsOf(other.map((t) => t.id))).toEqual(['team-b', 'team-b']);

    // The minute is over (moved back rather than waited for): the next pass lets team-a's work go.
    await db.execute(sql`update tenants set minute_at = now() - interval '61 seconds' where id = 'team-a'`);
    await loop.runOnce();
    expect(await waitingOf('team-a')).toBeNull();
    expect(await taskClaim(db, agentA, { limit: 2 })).toHaveLength(2);
    // Those count in a new minute, which they fill again.
    await loop.runOnce();
    expect((await rowsOf<{ minute_tokens: number }>(db, sql`select minute_tokens::int from tenants where id = 'team-a'`))[0]!.minute_tokens).toBe(2000);
    expect(await waitingOf('team-a')).toMatch(/^tokens quota/);
  });

  it('one tenant alone with a tokens quota is held to it too (its claims log what they take)', async () => {
    await db.execute(sql`delete from tenants where id in ('team-a', 'team-b')`);
    await tenantSet(db, 'default', { maxTokensPerMinute: 1500 });
    await submit('default', 3, 1000);
    expect(await taskClaim(db, 'w', { limit: 2 })).toHaveLength(2);
    await loop.runOnce();
    expect(await taskClaim(db, 'w', { limit: 10 })).toEqual([]);
    await tenantSet(db, 'default', { maxTokensPerMinute: null });
    await loop.runOnce();
    expect(await taskClaim(db, 'w', { limit: 10 })).toHaveLength(1);
  });

  it('a bad quota is refused naming it, and changes nothing', async () => {
    await expect(tenantSet(db, 'team-a', { maxUsdPerDay: -1 })).rejects.toThrow(/max_usd_per_day -1: must be at least 0/);
    await expect(tenantSet(db, 'team-a', { maxTokensPerMinute: 2.5 })).rejects.toThrow(/max_tokens_per_minute 2.5: must be a whole number/);
    expect((await tenantShares(db)).find((t) => t.id === 'team-a')).toMatchObject({ maxUsdPerDay: null, maxTokensPerMinute: null });
  });
});
