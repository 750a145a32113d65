import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, rowsOf } from '../../helpers/factories.js';

const { db } = await testDatabase();
beforeEach(() => databaseReset(db));

/** The heap page the task's current row version is on (its ctid's block). */
const pageOf = async (id: string) =>
  (await rowsOf<{ page: string }>(db, sql`select (ctid::text::point)[0]::text as page from tasks where id = ${id}`))[0]!.page;

// tasks keeps room on each page (migration 0052, fillfactor 70) for the versions a claim and a completion write: on
// the row's own page PostgreSQL logs only the changed part of the row, and no lock record before it. With every page
// full (fillfactor 100) the claimed task's next version moved to another page.
describe('the versions a claim and a completion write stay on the row\'s page', () => {
  it('a task inserted among others is claimed and completed on the page it was inserted on', async () => {
    const keys = Array.from({ length: 80 }, (_, i) => `t${i}`);
    const dagId = await dagCreate(db, `name: pages\ntasks:\n${keys.map((k) => `  ${k}: { type: t }`).join('\n')}\n`);
    const inserted = new Map((await rowsOf<{ id: string; page: string }>(db, sql`
      select id, (ctid::text::point)[0]::text as page from tasks where dag_id = ${dagId}`)).map((r) => [r.id, r.page]));
    expect(new Set(inserted.values()).size).toBeGreaterThan(2); // several pages, each filled to its fillfactor

    const [t] = await taskClaim(db, await agentCreate(db, 'pages-a'));
    expect(await pageOf(t!.id)).toBe(inserted.get(t!.id));
    await taskComplete(db, { taskId: t!.id, fence: t!.fence, output: { ok: true } });
    expect(await pageOf(t!.id)).toBe(inserted.get(t!.id));
  });
});
