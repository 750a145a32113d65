/**
 * The claimer beside a large DAG's submit, in a process of its own (large-dag.ts): an agent on another node, whose
 * claims share the database with the submit but not its event loop. Forked with the database's URL; claims one task
 * at a time (and completes it) from `go` until `stop`, then sends the claims' times in ms.
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../src/db/connection.js';
import { taskClaim } from '../../src/engine/claim.js';
import { textArray } from '../../src/db/queries/run.js';

const [url, agentId, capability] = process.argv.slice(2) as [string, string, string];
const d = await databaseOpen({ url, poolSize: 2, migrate: false });
let [go, stop] = [false, false];
process.on('message', (m) => { if (m === 'go') go = true; if (m === 'stop') stop = true; });
const claimOnce = async (into?: number[]) => {
  const t0 = performance.now();
  const got = await taskClaim(d.db, agentId, { limit: 1, capabilities: [capability] });
  into?.push(performance.now() - t0);
  if (got.length !== 1) throw new Error('the live DAG ran out of READY tasks');
  await d.db.execute(sql`update tasks set status = 'completed', completed_at = now() where id = any(${textArray(got.map((t) => t.id))})`);
};
// Warm: the claim's statement prepared, the process's hot paths compiled.
for (let i = 0; i < 200; i++) await claimOnce();
process.send!('ready');
while (!go) await new Promise((r) => setTimeout(r, 1));
const ms: number[] = [];
while (!stop) await claimOnce(ms);
process.send!(JSON.stringify(ms));
await d.close();
