import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { embeddedServerStart, type EmbeddedServer } from '../../src/db/embedded.js';
import { postmasterPid } from '../helpers/proc.js';

// A watchdog that notices the embedded server gone while its postmaster is still shutting down
// used to find the recorded port taken, move the server to a new port (written to the data
// folder's port file) and fail on the old lock file; agents in other processes then reconnected
// to a port nothing listened on. A SIGSTOPped postmaster holds its port and lock file without
// answering, as one shutting down slowly does, for as long as the test wants.
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-settle-'));
chmodSync(dataDir, 0o755);
const servers: EmbeddedServer[] = [];

afterAll(async () => {
  for (const s of servers.reverse()) await s.stop().catch(() => {});
  rmSync(dataDir, { recursive: true, force: true });
});

describe('a start while the previous postmaster has not let go', () => {
  it('waits for it to exit and comes back on the recorded port', async () => {
    const first = await embeddedServerStart({ dataDir, database: 'settle', ephemeral: true });
    servers.push(first);
    const clusterDir = path.join(dataDir, 'pg');
    const pid = postmasterPid(clusterDir);
    process.kill(pid, 'SIGSTOP');
    let settled = false;
    const again = embeddedServerStart({ dataDir, database: 'settle', ephemeral: true, restart: true }).finally(() => (settled = true));
    let stopping: Promise<void>;
    try {
      // Past the 3 s probe: the starter has found the server not answering and must not move on.
      await new Promise((r) => setTimeout(r, 4_500));
      expect(settled).toBe(false);
      expect(readFileSync(path.join(dataDir, 'port'), 'utf8').trim()).toBe(String(first.port));
    } finally {
      // The owner's stop (SIGINT) waits until the postmaster runs again, so it resumes shutting down.
      stopping = first.stop();
      process.kill(pid, 'SIGCONT');
    }
    await stopping;
    const second = await again;
    servers.push(second);
    expect(second).toMatchObject({ owned: true, port: first.port, url: first.url });
    expect(postmasterPid(clusterDir)).not.toBe(pid);
  }, 60_000);
});
