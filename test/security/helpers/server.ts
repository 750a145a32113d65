import { spawn } from 'node:child_process';
import { leash } from '../../helpers/child-leash.js';
import { afterAll, expect } from 'vitest';
import type { Database } from '../../../src/db/handle.js';
import { tokenCreate } from '../../../src/auth/tokens.js';
import { eventually } from '../../helpers/wait.js';
import { CLI_COMPILED } from '../../helpers/cli.js';

export interface Reply { status: number; body: any; headers: Headers }
export type Call = (method: string, path: string, o?: { token?: string | null; body?: unknown; raw?: string | Buffer; contentType?: string; timeoutMs?: number }) => Promise<Reply>;

export interface ServerProcess {
  url: string;
  adminToken: string;
  call: Call;
  /** Submit a DAG as YAML with the admin token; it must be accepted (201). Returns its id. */
  submit(yaml: string): Promise<string>;
  /** What the server printed on stdout and stderr so far. */
  output(): string;
  /** Whether the server process is still alive. */
  alive(): boolean;
  stop(): Promise<void>;
}

/**
 * `dagent up` as a real process on this test file's database, with its HTTP API on
 * a free port: an attack that freezes or crashes the server cannot take the test
 * runner with it. Stopped after the file.
 */
export async function serverStart(database: Database, o: { args?: string[]; env?: Record<string, string> } = {}): Promise<ServerProcess> {
  const child = leash(spawn(process.execPath, [...CLI_COMPILED, 'up', '--port', '0', ...(o.args ?? [])], {
    env: { ...process.env, DATABASE_URL: database.url, DAGENT_LOG_LEVEL: 'warn', ...o.env }, stdio: ['ignore', 'pipe', 'pipe'],
  }));
  let out = '';
  child.stdout.on('data', (b) => (out += b));
  child.stderr.on('data', (b) => (out += b));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const url = await eventually('dagent up listening', async () => {
    if (child.exitCode !== null) throw new Error(`dagent up exited: ${out}`);
    return /HTTP API and dashboard on (http:\/\/\S+?)\/ /.exec(out)?.[1];
  }, 60_000);
  const adminToken = (await tokenCreate(database.db, { role: 'admin', name: 'security-suite' })).token;
  const call: Call = async (method, path, c = {}) => {
    const headers: Record<string, string> = {};
    const token = c.token === undefined ? adminToken : c.token;
    if (token) headers.authorization = `Bearer ${token}`;
    let body: string | Buffer | undefined;
    if (c.raw !== undefined) {
      body = c.raw;
      headers['content-type'] = c.contentType ?? 'application/json';
    } else if (c.body !== undefined) {
      body = JSON.stringify(c.body);
      headers['content-type'] = 'application/json';
    }
    // A deadline on liveness only: a frozen server must fail the test, not hang it.
    const res = await fetch(`${url}${path}`, { method, headers, body, signal: AbortSignal.timeout(c.timeoutMs ?? 30_000) });
    const text = await res.text();
    let parsed: unknown = text;
    try { parsed = JSON.parse(text); } catch { /* not JSON */ }
    return { status: res.status, body: parsed, headers: res.headers };
  };
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    // A server frozen by an attack cannot run its SIGTERM handler.
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(killer);
  };
  afterAll(stop);
  const submit = async (yaml: string) => {
    const r = await call('POST', '/api/dags', { raw: yaml, contentType: 'application/yaml' });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.results[0].dagId as string;
  };
  return { url, adminToken, call, submit, output: () => out, alive: () => child.exitCode === null && child.signalCode === null, stop };
}

/** The request is refused with `status` (and `code`), and the body says why. */
export async function refused(status: number, code: string | null, r: Promise<Reply>, why?: RegExp): Promise<Reply> {
  const reply = await r;
  expect(reply.status, JSON.stringify(reply.body)).toBe(status);
  if (code) expect(reply.body?.error?.code, JSON.stringify(reply.body)).toBe(code);
  if (why) expect(reply.body.error.message).toMatch(why);
  return reply;
}
