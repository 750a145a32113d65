import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskClaimReadySql } from '../../../src/db/queries/tasks-claim.js';
import { taskCompleteMany } from '../../../src/engine/attempt/complete.js';
import { dagSubmit } from '../../../src/engine/dag/submit.js';
import { tenantCreate } from '../../../src/engine/ops/tenants.js';
import { tenantShareCreate } from '../../../src/maintenance/tenant-share.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagSpec, databaseReset, rowsOf } from '../../helpers/factories.js';

// The fair-share claim walks tenants in virtual-time order, those the share loop last saw with READY work first: an
// idle tenant sits at the lowest vtime (the loop lifts it there), so in vtime order alone every claim would probe
// every idle tenant before one with work. Work of a tenant the loop has not seen yet is still claimed.
const database = await testDatabase();
const { db } = database;
const loop = tenantShareCreate({ db });

beforeEach(async () => {
  await databaseReset(db);
  for (const id of ['a', 'b', 'c']) await tenantCreate(db, { id });
  await agentCreate(db, 'w');
});

const submit = async (tenant: string, n: number) => {
  const tasks = Array.from({ length: n }, (_, i) => `  t${i}: { type: t }`).join('\n');
  await dagSubmit(db, [await dagSpec(`name: ${tenant}-${n}\ntasks:\n${tasks}\n`)], { tenant });
};
const claimOne = async () => {
  const [t] = await taskClaim(db, 'w', { limit: 1 });
  if (!t) return null;
  await taskCompleteMany(db, [{ taskId: t.id, fence: t.fence, output: null }]);
  return (await rowsOf<{ tenant_id: string }>(db, sql`select tenant_id from tasks where id = ${t.id}`))[0]!.tenant_id;
};
const hints = async () => Object.fromEntries((await rowsOf<{ id: string; ready_hint: boolean }>(db, sql`
  select id, ready_hint from tenants where id in ('a', 'b', 'c') order by id`)).map((r) => [r.id, r.ready_hint]));

describe('the order tenants are walked in', () => {
  it('the loop hints the tenants with READY work; a submit hints its tenant; hinted tenants go first, the others still get their work claimed', async () => {
    // Every tenant had work once; now none has: the loop hints none of them.
    for (const id of ['a', 'b', 'c']) await submit(id, 1);
    while (await claimOne());
    await loop.runOnce();
    expect(await hints()).toEqual({ a: false, b: false, c: false });

    // New work through a submit is hinted at once, before the loop's next pass.
    await submit('c', 2);
    expect(await hints()).toEqual({ a: false, b: false, c: true });
    // a has READY work the loop has not seen (made READY another way than a submit), and the lowest vtime.
    await submit('a', 1);
    await db.execute(sql`update tenants set ready_hint = false, vtime = 0 where id = 'a'`);
    await db.execute(sql`update tenants set vtime = 100 where id = 'c'`);
    expect(await claimOne()).toBe('c');
    expect(await claimOne()).toBe('c');
    // c has nothing left: a's work is claimed all the same (the walk goes on to the tenants not hinted).
    expect(await claimOne()).toBe('a');
    expect(await claimOne()).toBeNull();

    // The loop's pass sets each hint as it is: only b, with work, is hinted.
    await submit('b', 1);
    await loop.runOnce();
    expect(await hints()).toEqual({ a: false, b: true, c: false });
  });

  it('what claims served since the loop last folded counts in the order at once, per weight', async () => {
    // Tasks of 8 tokens; a at vtime 0 and weight 2, b at vtime 10 and weight 1, c with no work. No fold in between:
    // each claim's place for a is 0 + 8 × (claims of a) ÷ 2, for b 10 + 8 × (claims of b).
    const tasks = (n: number) => Array.from({ length: n }, (_, i) => `  t${i}: { type: t, spec: { constraints: { estimated_tokens: 8 } } }`).join('\n');
    for (const id of ['a', 'b']) await dagSubmit(db, [await dagSpec(`name: ${id}\ntasks:\n${tasks(6)}\n`)], { tenant: id });
    // A first claim (of c's urgent task, c first in either order) meets several tenants' work: claims are in
    // fair-share order from here, whichever test ran before.
    await dagSubmit(db, [await dagSpec('name: c\ntasks:\n  t: { type: t, priority: 0 }\n')], { tenant: 'c' });
    await db.execute(sql`update tenants set vtime = case when id = 'c' then 0 else 100 end`);
    expect(await claimOne()).toBe('c');
    await db.execute(sql`update tenants set vtime = 0, weight = 2 where id = 'a'`);
    await db.execute(sql`update tenants set vtime = 10 where id = 'b'`);
    const order: string[] = [];
    for (let i = 0; i < 6; i++) order.push((await claimOne())!);
    // a 0, 4, 8 (b's 10 not reached), 12 > 10: b; then a 12 < b 18: a; a 16 < 18: a.
    expect(order).toEqual(['a', 'a', 'a', 'b', 'a', 'a']);
    expect((await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from tenant_served where tenant_id in ('a', 'b')`))[0]!.n).toBe(6);
  });

  it('the walk steps through tenants_claim_order_idx: the claim orders tenants by the index\'s own expression', async () => {
    // Were the claim's key (tenantOrderKey) to drift from the index's (a constant of another type, say), PostgreSQL
    // would sort every covered tenant on each claim again, and nothing else would notice.
    await submit('a', 1);
    await submit('b', 1);
    const plan = JSON.stringify(await rowsOf(db, sql`explain (format json) ${taskClaimReadySql('w', [], 1, 60, { fair: true })}`));
    expect(plan).toContain('"Index Name":"tenants_claim_order_idx"');
  });

  it('with one tenant the loop writes no hint: an idle pass changes nothing', async () => {
    await db.execute(sql`delete from tenants where id in ('a', 'b', 'c')`);
    await submit('default', 1);
    while (await claimOne());
    const before = await rowsOf(db, sql`select * from tenants`);
    expect(await loop.runOnce()).toBe(0);
    expect(await rowsOf(db, sql`select * from tenants`)).toEqual(before);
  });
});
