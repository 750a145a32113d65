import { afterAll } from 'vitest';
import pino from 'pino';
import type { Database } from '../../src/db/handle.js';
import { httpServerCreate, type HttpOptions, type HttpServer } from '../../src/http/server.js';
import { tokenCreate } from '../../src/auth/tokens.js';

export interface TestHttp {
  url: string;
  server: HttpServer;
  adminToken: string;
  /** A fresh agent token acting as `agentId`, granted `capabilities` (and validator capabilities by name). */
  agentToken(agentId: string, capabilities?: string[], validators?: string[], models?: string[]): Promise<string>;
  /** fetch against the server with a token (admin by default; null for none); JSON in and out. */
  call(method: string, path: string, o?: { token?: string | null; body?: unknown; raw?: string; contentType?: string }): Promise<{ status: number; body: any; headers: Headers }>;
}

/**
 * The HTTP API on a free port of 127.0.0.1 over this test file's database, closed after the file. Every JSON answer is
 * checked against its route's response schema: one that drifts from it is a 500 naming the route and the field.
 */
export async function testHttp(database: Database, opts: Partial<HttpOptions> = {}): Promise<TestHttp> {
  const server = await httpServerCreate({
    db: database.db, databaseUrl: database.sessionUrl, log: pino({ level: 'silent' }), streamPollMs: 200, checkResponses: true, ...opts,
  });
  const url = await server.listen(0, '127.0.0.1');
  afterAll(() => server.close());
  const adminToken = (await tokenCreate(database.db, { role: 'admin', name: 'test' })).token;
  const call: TestHttp['call'] = async (method, path, o = {}) => {
    const headers: Record<string, string> = {};
    const token = o.token === undefined ? adminToken : o.token;
    if (token) headers.authorization = `Bearer ${token}`;
    let body: string | undefined;
    if (o.raw !== undefined) {
      body = o.raw;
      headers['content-type'] = o.contentType ?? 'application/json';
    } else if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(`${url}${path}`, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try { parsed = JSON.parse(text); } catch { /* not JSON (metrics) */ }
    return { status: res.status, body: parsed, headers: res.headers };
  };
  return {
    url, server, adminToken, call,
    agentToken: async (agentId, capabilities = [], validators = [], models = []) => (await tokenCreate(database.db, { role: 'agent', agentId, capabilities, validators, models })).token,
  };
}
