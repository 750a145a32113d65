/**
 * The claimer beside a large DAG's submit, in a process of its own (large-dag.ts): an agent on another node, whose
 * claims share the database with the submit but not its event loop. Forked with the database's URL and its agent id;
 * claims one task at a time (and finishes it) from `go` until `stop`, then sends the claims' times in ms.
 */
import { databaseOpen } from '../../src/db/open.js';
import { liveClaim } from './large-dag.js';

const [url, agentId] = process.argv.slice(2) as [string, string];
const d = await databaseOpen({ url, poolSize: 2, migrate: false });
let [go, stop] = [false, false];
process.on('message', (m) => { if (m === 'go') go = true; if (m === 'stop') stop = true; });
// Warm: the claim's statement prepared, the process's hot paths compiled.
for (let i = 0; i < 200; i++) await liveClaim(d.db, agentId);
process.send!('ready');
while (!go) await new Promise((r) => setTimeout(r, 1));
const ms: number[] = [];
while (!stop) await liveClaim(d.db, agentId, ms);
process.send!(JSON.stringify(ms));
await d.close();
