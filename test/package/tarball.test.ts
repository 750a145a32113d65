import { execFile, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { rowsOf } from '../helpers/factories.js';
import { leash } from '../helpers/child-leash.js';
import { eventually } from '../helpers/wait.js';

// The package as a user gets it: `npm pack`, the tarball installed into a new project, then used from
// ESM, CommonJS, TypeScript without skipLibCheck, and the command line, with agents in plain JavaScript
// and in TypeScript. Dependencies come from npm's cache when it has them (--prefer-offline).
const ROOT = path.resolve('.');
const run = promisify(execFile);
const database = await testDatabase();
const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as { devDependencies: Record<string, string> };
let dir: string;
let app: string;
const bin = () => path.join(app, 'node_modules/.bin/dagent');
const installed = (...p: string[]) => path.join(app, 'node_modules/dagent', ...p);
/** The checkout's folders the package is neither built from nor made of (the build's output is remade). */
const NOT_PACKED = new Set(['.git', 'node_modules', 'dist', 'test', 'docs', '.dagent']);

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-package-'));
  // npm pack runs the prepare script first: the tarball holds a fresh build. It packs a copy of the project:
  // the build empties dist/ first, and the checkout's dist/cli/ is the CLI other test files are running.
  const project = path.join(dir, 'project');
  cpSync(ROOT, project, { recursive: true, filter: (p) => !NOT_PACKED.has(path.relative(ROOT, p)) });
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(project, 'node_modules'));
  const packed = await run('npm', ['pack', '--pack-destination', dir, '--silent'], { cwd: project, maxBuffer: 16 << 20 });
  const tarball = path.join(dir, packed.stdout.trim().split('\n').pop()!);
  app = path.join(dir, 'app');
  await run('mkdir', [app]);
  writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'uses-dagent', private: true, type: 'module' }));
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball,
    `tsx@${manifest.devDependencies.tsx}`, `@types/node@${manifest.devDependencies['@types/node']}`], { cwd: app, maxBuffer: 16 << 20 });
}, 600_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Every file under `d`, relative to it. */
function filesUnder(d: string, rel = ''): string[] {
  return readdirSync(path.join(d, rel), { withFileTypes: true }).flatMap((e) => e.isDirectory() ? filesUnder(d, path.join(rel, e.name)) : [path.join(rel, e.name)]);
}

describe('the packed and installed package', () => {
  it('holds compiled JavaScript, declarations, the migrations and the dashboard, and no TypeScript loader', () => {
    const files = filesUnder(installed());
    expect(files).toContain('dist/src/index.js');
    expect(files).toContain('dist/src/index.d.ts');
    expect(files).toContain('dist/cjs/index.cjs');
    expect(files).toContain('dist/cjs/src/index.d.cts');
    expect(files).toContain('dist/agents/shell.js');
    expect(files).toContain('dashboard/index.html');
    expect(files.filter((f) => f.startsWith('migrations/') && f.endsWith('.sql')).length).toBeGreaterThan(10);
    // Sources are not shipped, only the dashboard's plain files.
    expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.endsWith('.d.cts'))).toEqual([]);
    const pkg = JSON.parse(readFileSync(installed('package.json'), 'utf8')) as { dependencies: Record<string, string>; peerDependenciesMeta: Record<string, { optional: boolean }> };
    expect(Object.keys(pkg.dependencies)).not.toContain('tsx');
    expect(Object.keys(pkg.dependencies)).not.toContain('esbuild');
    expect(pkg.peerDependenciesMeta.tsx).toEqual({ optional: true });
  });

  it('imports from ESM and requires from CommonJS', async () => {
    writeFileSync(path.join(app, 'esm.mjs'), "import { defineAgent, dagSubmit, ERROR_CODES } from 'dagent';\nconsole.log(typeof defineAgent, typeof dagSubmit, ERROR_CODES.NOT_FOUND.status);\n");
    writeFileSync(path.join(app, 'cjs.cjs'), "const { defineAgent, dagSubmit, ERROR_CODES } = require('dagent');\nconsole.log(typeof defineAgent, typeof dagSubmit, ERROR_CODES.NOT_FOUND.status);\n");
    expect((await run(process.execPath, ['esm.mjs'], { cwd: app })).stdout).toBe('function function 404\n');
    expect((await run(process.execPath, ['cjs.cjs'], { cwd: app })).stdout).toBe('function function 404\n');
  });

  it('dagent/ai-sdk imports and requires, and its errors are dagent\'s TaskError in both module systems', async () => {
    const check = (load: string) => `${load}\nconst e = ai.llmHttpError(429, 'slow down', '7');\nconsole.log(typeof ai.dagentModel, e instanceof dagent.TaskError, e.errorClass, e.details.retryAfterSec, new ai.RefusalError('no') instanceof dagent.TaskError);\n`;
    writeFileSync(path.join(app, 'ai-esm.mjs'), check("import * as dagent from 'dagent';\nimport * as ai from 'dagent/ai-sdk';"));
    writeFileSync(path.join(app, 'ai-cjs.cjs'), check("const dagent = require('dagent');\nconst ai = require('dagent/ai-sdk');"));
    expect((await run(process.execPath, ['ai-esm.mjs'], { cwd: app })).stdout).toBe('function true rate_limit 7 true\n');
    expect((await run(process.execPath, ['ai-cjs.cjs'], { cwd: app })).stdout).toBe('function true rate_limit 7 true\n');
  });

  it('has declarations that compile without skipLibCheck, from ESM and from CommonJS', async () => {
    writeFileSync(path.join(app, 'typed.ts'), `import { databaseOpen, dagSourceLoad, dagSubmit, dagStatus, defineAgent, type TaskContext } from 'dagent';
import { dagentTools, type DagentModelOptions } from 'dagent/ai-sdk';
export const options: DagentModelOptions = { stream: false };
export const agent = defineAgent({ name: 'typed', capabilities: ['typed'], async run(task, ctx: TaskContext) { ctx.log.info('hi'); return { key: task.key, tools: Object.keys(dagentTools(ctx).tools) }; } });
export async function submitOne(): Promise<string> {
  const database = await databaseOpen({ url: process.env.DATABASE_URL });
  const spec = await dagSourceLoad('name: a\\ntasks:\\n  one: { type: typed }\\n', 'a.yaml');
  const [submitted] = await dagSubmit(database.db, [spec]);
  const status = await dagStatus(database.db, submitted!.dagId);
  await database.close();
  return status.dag.status;
}
`);
    writeFileSync(path.join(app, 'required.cts'), `import dagent = require('dagent');
import ai = require('dagent/ai-sdk');
export const name: string = dagent.defineAgent({ name: 'required', capabilities: ['required'], async run() { return 1; } }).name;
export const cap: number = ai.LLM_MAX_OUTPUT_TOKENS_DEFAULT;
`);
    writeFileSync(path.join(app, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: false, types: ['node'] },
      files: ['typed.ts', 'required.cts'],
    }));
    const tsc = await run(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', app]).catch((e: { stdout: string }) => e);
    expect(tsc.stdout).toBe('');
  }, 120_000);

  it('npx dagent --help lists the commands', async () => {
    const { stdout } = await run('npx', ['--no-install', 'dagent', '--help'], { cwd: app });
    for (const command of ['submit', 'status', 'agent', 'up', 'dlq']) expect(stdout).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
  });

  it('submits a DAG and runs it with one agent in plain JavaScript and one in TypeScript', async () => {
    writeFileSync(path.join(app, 'js-agent.mjs'), "import { defineAgent } from 'dagent';\nexport default defineAgent({ name: 'js', capabilities: ['js'], async run(task) { return { by: 'javascript', key: task.key }; } });\n");
    writeFileSync(path.join(app, 'ts-agent.ts'), "import { defineAgent, type ClaimedTask } from 'dagent';\nconst by: string = 'typescript';\nexport default defineAgent({ name: 'ts', capabilities: ['ts'], async run(task: ClaimedTask) { return { by, key: task.key }; } });\n");
    writeFileSync(path.join(app, 'two.yaml'), [
      'name: two-languages',
      'tasks:',
      '  first: { type: js, spec: { constraints: { capabilities: [js] } } }',
      '  second: { type: ts, depends_on: [first], spec: { constraints: { capabilities: [ts] } } }',
      '',
    ].join('\n'));
    const env = { ...process.env, DATABASE_URL: database.url, DAGENT_LOG_LEVEL: 'warn' };
    const submitted = await run(bin(), ['submit', 'two.yaml', '--json'], { cwd: app, env });
    const dagId = (JSON.parse(submitted.stdout) as Array<{ dagId: string }>)[0]!.dagId;
    // Traces printed: the installed CLI loads the OpenTelemetry SDK from the app's node_modules.
    const agents = ['js-agent.mjs', 'ts-agent.ts'].map((file) => {
      const child = leash(spawn(bin(), ['agent', 'run', file, '--no-maintenance', '--poll-ms', '200'], { cwd: app, env: { ...env, OTEL_TRACES_EXPORTER: 'console' }, stdio: ['ignore', 'pipe', 'pipe'] }));
      let out = '';
      child.stdout.on('data', (b) => (out += b));
      child.stderr.on('data', (b) => (out += b));
      // 'close': the process exited and its output was all read.
      return { child, output: () => out, exited: new Promise<number | null>((r) => child.on('close', (code) => r(code))) };
    });
    await eventually('the DAG completed', async () => (await rowsOf<{ status: string }>(database.db, sql`select status from dags where id = ${dagId}`))[0]!.status === 'completed', 60_000)
      .catch((e: Error) => { throw new Error(`${e.message}\n${agents.map((a) => a.output()).join('\n')}`); });
    const outputs = await rowsOf<{ key: string; output: unknown }>(database.db, sql`select key, output from tasks where dag_id = ${dagId} order by key`);
    expect(outputs).toEqual([{ key: 'first', output: { by: 'javascript', key: 'first' } }, { key: 'second', output: { by: 'typescript', key: 'second' } }]);
    for (const a of agents) a.child.kill('SIGTERM');
    expect(await Promise.all(agents.map((a) => a.exited))).toEqual([0, 0]);
    expect(agents[0]!.output()).toContain("name: 'task first'");
    expect(agents[1]!.output()).toContain("name: 'task second'");
    expect(existsSync(installed('src/cli'))).toBe(false);
  }, 120_000);

  it('under npx, a SIGTERM to npm (which npm does not pass on) still stops the agent cleanly', async () => {
    const env = { ...process.env, DATABASE_URL: database.url, DAGENT_LOG_LEVEL: 'warn' };
    const npx = leash(spawn('npx', ['--no-install', 'dagent', 'agent', 'run', 'js-agent.mjs', '--no-maintenance'], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] }));
    let out = '';
    npx.stdout.on('data', (b) => (out += b));
    npx.stderr.on('data', (b) => (out += b));
    // The pipe closes when the last process holding it, dagent, has exited.
    const closed = new Promise<void>((r) => npx.stdout.on('close', () => r()));
    await eventually('the agent runs', async () => out.includes('running with capabilities'), 30_000);
    npx.kill('SIGTERM');
    await eventually('the agent stopped', async () => /: stopped/.test(out), 15_000).catch((e: Error) => { throw new Error(`${e.message}\n${out}`); });
    expect(out).toMatch(/npm exited, draining 0 running task\(s\)/);
    await closed;
  }, 60_000);
});

