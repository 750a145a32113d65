/**
 * What the server does for a run, per task: the WAL the cluster wrote (every process's: the statements', their
 * commits', the checkpointer's) and the CPU of all its processes (/proc). The two figures of "Performance, third
 * pass" item 1; the peers' runs are measured the same way, on the same server.
 */
import pg from 'pg';
import { serverCpuSeconds } from '../helpers/proc.js';

export interface ServerCost { walBytesPerTask: number; cpuUsPerTask: number }

export async function serverCostDuring<T>(url: string, clusterDir: string, tasks: number, run: () => Promise<T>): Promise<{ result: T; cost: ServerCost }> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const lsn = async () => (await c.query<{ l: string }>('select pg_current_wal_insert_lsn()::text as l')).rows[0]!.l;
    const [lsn0, cpu0] = [await lsn(), serverCpuSeconds(clusterDir)];
    const result = await run();
    const cpu = serverCpuSeconds(clusterDir) - cpu0;
    const { rows } = await c.query<{ bytes: string }>('select (pg_current_wal_insert_lsn() - $1::pg_lsn)::text as bytes', [lsn0]);
    return { result, cost: { walBytesPerTask: Number(rows[0]!.bytes) / tasks, cpuUsPerTask: (cpu * 1e6) / tasks } };
  } finally {
    await c.end();
  }
}

export const serverCostText = (c: ServerCost) => `WAL ${c.walBytesPerTask.toFixed(0)} bytes, PostgreSQL CPU ${c.cpuUsPerTask.toFixed(1)} µs (all its processes)`;
