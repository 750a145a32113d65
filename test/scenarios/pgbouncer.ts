/**
 * npm run scenario:pgbouncer [-- --tasks N] [-- --no-tests] [-- --files <vitest filters and options…>]
 *
 * dagent behind PgBouncer in transaction mode (docs/operations.md#behind-pgbouncer), with a real PgBouncer: not part
 * of `npm test`, because PgBouncer is not on npm. It takes `pgbouncer` from PGBOUNCER or the PATH, else Debian's
 * packages (pgbouncer, libc-ares2), fetched with `apt-get download` and unpacked into .dagent/tools: nothing is
 * installed on the system. PostgreSQL is DATABASE_URL's server, else a throwaway embedded one.
 *
 * 1. Load: the same flat work (claim, complete) by 8 concurrent claimers, straight to PostgreSQL and through PgBouncer,
 *    side by side: tasks/s, claim p50/p99, and the connections PostgreSQL held.
 * 2. Faults: the fault, runtime and long-poll test files run with every test database reached through PgBouncer
 *    (DAGENT_TEST_POOLER_URL, test/helpers/db.ts) and DATABASE_DIRECT_URL set for LISTEN and migrations.
 *
 * Prints figures and the test summary; exits non-zero when a test failed.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { databaseOpen } from '../../src/db/open.js';
import type { Database } from '../../src/db/handle.js';
import { embeddedServerStart, freePortFind } from '../../src/db/embedded.js';
import { agentRegister, taskClaim, taskComplete } from '../../src/index.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { TASK_DEFAULTS, type TaskSpec } from '../../src/dag/spec.js';
import { percentile } from './percentile.js';

const argValue = (flag: string) => { const i = process.argv.indexOf(flag); return i < 0 ? undefined : process.argv[i + 1]; };
const TASKS = Number(argValue('--tasks') ?? 10_000);
const CLAIMERS = 8;
const BATCH = 10;
const filesAt = process.argv.indexOf('--files');
const TESTS = !process.argv.includes('--no-tests');
const FILES = filesAt < 0
  ? ['test/faults', 'test/runtime', 'test/http/long-poll.test.ts', 'test/http/api.test.ts', 'test/cli/up.test.ts', 'test/engine/attempt',
    // It finds which of PostgreSQL's connections are its agent's by its proxy's client ports, which a pooler hides.
    '--exclude', 'test/faults/lost-claim.test.ts']
  : process.argv.slice(filesAt + 1);
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

/** pgbouncer and the library path it needs. */
function pgbouncerFind(): { bin: string; libs?: string } {
  if (process.env.PGBOUNCER) return { bin: process.env.PGBOUNCER };
  const onPath = spawnSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' }).stdout.trim();
  if (onPath) return { bin: onPath };
  const tools = path.join(ROOT, '.dagent/tools/pgbouncer');
  const bin = path.join(tools, 'usr/sbin/pgbouncer');
  if (!existsSync(bin)) {
    console.log('pgbouncer is not on the PATH: fetching Debian\'s packages into .dagent/tools (nothing is installed on the system)');
    const debs = path.join(tools, 'debs');
    mkdirSync(debs, { recursive: true });
    chmodSync(debs, 0o777); // apt-get download writes as the _apt user where it can
    execFileSync('apt-get', ['download', 'pgbouncer', 'libc-ares2'], { cwd: debs, stdio: ['ignore', 'ignore', 'inherit'] });
    for (const f of readdirSync(debs).filter((n) => n.endsWith('.deb'))) execFileSync('dpkg-deb', ['-x', path.join(debs, f), tools]);
  }
  return { bin, libs: path.join(tools, 'usr/lib/x86_64-linux-gnu') };
}

async function pgbouncerStart(server: URL): Promise<{ url: string; stop(): Promise<void>; version: string }> {
  const { bin, libs } = pgbouncerFind();
  const env = { ...process.env, ...(libs ? { LD_LIBRARY_PATH: libs } : {}) };
  const version = execFileSync(bin, ['--version'], { env, encoding: 'utf8' }).split('\n')[0]!;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-pgbouncer-'));
  chmodSync(dir, 0o777);
  const port = await freePortFind();
  const user = decodeURIComponent(server.username || 'postgres');
  const password = decodeURIComponent(server.password);
  writeFileSync(path.join(dir, 'userlist.txt'), `"${user}" ""\n`);
  writeFileSync(path.join(dir, 'pgbouncer.ini'), [
    '[databases]',
    `* = host=${server.hostname} port=${server.port || 5432} user=${user}${password ? ` password=${password}` : ''}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1', `listen_port = ${port}`, 'unix_socket_dir =',
    'pool_mode = transaction', 'auth_type = trust', `auth_file = ${path.join(dir, 'userlist.txt')}`,
    'max_client_conn = 5000', 'default_pool_size = 40', 'max_db_connections = 0',
    `logfile = ${path.join(dir, 'pgbouncer.log')}`,
  ].join('\n'));
  for (const f of readdirSync(dir)) chmodSync(path.join(dir, f), 0o666);
  // PgBouncer will not run as root: as the postgres user then (the embedded server runs as it too).
  const asRoot = process.getuid?.() === 0;
  const child: ChildProcess = spawn(bin, ['-q', ...(asRoot ? ['-u', 'postgres'] : []), path.join(dir, 'pgbouncer.ini')], { env, stdio: ['ignore', 'inherit', 'inherit'] });
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise<boolean>((r) => {
      const s = net.connect(port, '127.0.0.1', () => { s.end(); r(true); });
      s.on('error', () => r(false));
    });
    if (ok) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const url = new URL(server);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  url.password = '';
  return {
    url: url.toString(), version,
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function withDb(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

async function admin(url: string, q: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try { await c.query(q); } finally { await c.end(); }
}

function task(key: string): TaskSpec {
  return {
    key, type: 'noop', body: { context: [], models: [], fallbackModels: [], input: {} }, requiredCapabilities: [],
    priority: 50, boostPerMinute: 0, dependsOn: [], maxAttempts: 3, retry: { ...TASK_DEFAULTS.retry }, tags: [],
  };
}


/** One claimer, one task at a time, nothing else running: what each call costs on its way, p50 claim and completion. */
async function soloCalls(d: Database) {
  const n = 500;
  await dagSubmit(d.db, [{ name: 'solo', params: {}, tasks: Array.from({ length: n }, (_, j) => task(`s${j}`)) }]);
  await agentRegister(d.db, { id: 'solo', type: 'bench', capabilities: [], maxConcurrent: 1 });
  const claimMs: number[] = [];
  const completeMs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const [t] = await taskClaim(d.db, 'solo', { start: true, limit: 1 });
    const t1 = performance.now();
    await taskComplete(d.db, { taskId: t!.id, fence: t!.fence, output: {} });
    claimMs.push(t1 - t0);
    completeMs.push(performance.now() - t1);
  }
  return { claimP50: percentile(claimMs, 50), completeP50: percentile(completeMs, 50) };
}

/** Flat work through `d`: TASKS tasks, CLAIMERS concurrent claim → complete loops. */
async function flatLoad(d: Database, serverUrl: string, dbName: string) {
  for (let i = 0; i < TASKS / 1000; i++) await dagSubmit(d.db, [{ name: `flat-${i}`, params: {}, tasks: Array.from({ length: 1000 }, (_, j) => task(`t${j}`)) }]);
  const claimMs: number[] = [];
  let peakConnections = 0;
  const watcher = new pg.Client({ connectionString: serverUrl });
  await watcher.connect();
  let watching = true;
  const watch = (async () => {
    while (watching) {
      const { rows: [r] } = await watcher.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, [dbName]);
      peakConnections = Math.max(peakConnections, r!.n);
      await new Promise((res) => setTimeout(res, 50));
    }
  })();
  const start = performance.now();
  await Promise.all(Array.from({ length: CLAIMERS }, async (_, i) => {
    const agentId = `load-${i}`;
    await agentRegister(d.db, { id: agentId, type: 'bench', capabilities: [], maxConcurrent: BATCH });
    for (;;) {
      const t0 = performance.now();
      const got = await taskClaim(d.db, agentId, { start: true, limit: BATCH });
      claimMs.push(performance.now() - t0);
      if (got.length === 0) return;
      for (const t of got) await taskComplete(d.db, { taskId: t.id, fence: t.fence, output: {} });
    }
  }));
  const seconds = (performance.now() - start) / 1000;
  watching = false;
  await watch;
  await watcher.end();
  return { tasksPerSec: TASKS / seconds, claimP50: percentile(claimMs, 50), claimP99: percentile(claimMs, 99), peakConnections };
}

async function main() {
  let serverUrl = process.env.DATABASE_URL;
  let stopServer = async () => {};
  if (!serverUrl) {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-scenario-'));
    chmodSync(dataDir, 0o755);
    const server = await embeddedServerStart({ dataDir, database: 'postgres', ephemeral: true });
    serverUrl = server.url;
    stopServer = async () => { await server.stop(); rmSync(dataDir, { recursive: true, force: true }); };
  }
  const bouncer = await pgbouncerStart(new URL(serverUrl));
  let failed = false;
  try {
    console.log(`PgBouncer: ${bouncer.version}, transaction mode, default_pool_size 40\n`);
    const rows: string[] = [];
    for (const via of ['PostgreSQL', 'PgBouncer'] as const) {
      const dbName = `dagent_scenario_${via.toLowerCase()}_${process.pid}`;
      await admin(serverUrl, `drop database if exists ${dbName}`);
      await admin(serverUrl, `create database ${dbName}`);
      const direct = withDb(serverUrl, dbName);
      await admin(direct, `alter role current_user in database ${dbName} set search_path to dagent`);
      const d = await databaseOpen(via === 'PgBouncer' ? { url: withDb(bouncer.url, dbName), directUrl: direct, poolSize: 20 } : { url: direct, poolSize: 20 });
      try {
        const solo = await soloCalls(d);
        const r = await flatLoad(d, serverUrl, dbName);
        rows.push(`| ${via} | ${solo.claimP50.toFixed(2)} | ${solo.completeP50.toFixed(2)} | ${Math.round(r.tasksPerSec).toLocaleString('en-US')} | ${r.claimP50.toFixed(2)} | ${r.claimP99.toFixed(2)} | ${r.peakConnections} |`);
      } finally {
        await d.close();
        await admin(serverUrl, `drop database if exists ${dbName} with (force)`);
      }
    }
    console.log(`Alone: one claimer, one task at a time (500). Flat: ${TASKS.toLocaleString('en-US')} tasks, ${CLAIMERS} claimers of ${BATCH}, each completion its own statement\n`);
    console.log('| via | alone: claim p50 ms | alone: completion p50 ms | flat: tasks/s | flat: claim p50 ms | flat: claim p99 ms | flat: connections at PostgreSQL (peak) |');
    console.log('|---|---|---|---|---|---|---|');
    for (const r of rows) console.log(r);
    if (!TESTS) return;
    console.log(`\nFault and runtime tests through PgBouncer: ${FILES.join(' ')}\n`);
    const run = spawnSync(process.execPath, [path.join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', ...FILES], {
      cwd: ROOT, stdio: 'inherit', env: { ...process.env, DATABASE_URL: serverUrl, DAGENT_TEST_POOLER_URL: bouncer.url },
    });
    failed = run.status !== 0;
  } finally {
    await bouncer.stop();
    await stopServer();
  }
  process.exit(failed ? 1 : 0);
}

await main();
