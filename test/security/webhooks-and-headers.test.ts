import { createServer } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { cliWith } from '../helpers/cli.js';
import { agentCreate, dagCreate, rowsOf } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { webhookDispatcherCreate } from '../../src/maintenance/webhook-dispatcher.js';
import { serverStart } from './helpers/server.js';

// Webhooks must not become a way into the server's own neighbourhood (loopback, link-local,
// cloud metadata), must not let a receiver exhaust the server, and must not list credentials.
// The dashboard's answers carry security headers.
const database = await testDatabase();
const { db } = database;
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });

/** A receiver on loopback; `endless`: answers 200 and then streams a body forever. */
async function receiver(endless = false) {
  let hits = 0;
  const server = createServer((req, res) => {
    hits++;
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      if (!endless) return res.end();
      const chunk = Buffer.alloc(64 * 1024, 120);
      const pump = () => { while (res.write(chunk)); };
      res.on('drain', pump);
      pump();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  afterAll(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, hits: () => hits };
}

async function deadLetterOne(name: string) {
  const dagId = await dagCreate(db, `name: ${name}\ntasks:\n  job: { type: build }\n`);
  const agent = await agentCreate(db, `agent-${name}`);
  const [t] = await taskClaim(db, agent, { dagId, start: true });
  await taskFail(db, { taskId: t!.id, fence: t!.fence, errorClass: 'crash', message: 'boom', retryable: false });
}

const deliveries = () => rowsOf<{ status: string; last_error: string | null; attempts: number }>(db, sql`
  select status, last_error, attempts from webhook_deliveries order by id`);

describe('webhooks stay out of the server\'s neighbourhood', () => {
  it('loopback, "this host", link-local and cloud-metadata URLs are refused when added (exit 2), unless an operator allows the host', async () => {
    for (const url of ['http://127.0.0.1:8080/x', 'http://localhost/x', 'http://0.0.0.0/x', 'http://[::1]/x', 'http://169.254.169.254/latest/meta-data/', 'http://[fd00:ec2::254]/', 'http://[::ffff:127.0.0.1]/x',
      // IPv6 addresses that carry an IPv4 one: IPv4-compatible, NAT64 (to the metadata address), SIIT, 6to4.
      'http://[::7f00:1]/x', 'http://[64:ff9b::a9fe:a9fe]/', 'http://[::ffff:0:7f00:1]/x', 'http://[2002:7f00:1::]/x']) {
      const r = await cli('webhooks', 'add', url);
      expect(r.code, `${url}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(/loopback, link-local or cloud-metadata|is this machine/);
    }
    expect((await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from webhooks`))[0]!.n).toBe(0);
    const allowed = cliWith({ ...process.env, DATABASE_URL: database.url, DAGENT_WEBHOOK_ALLOW_HOSTS: '127.0.0.1' });
    expect((await allowed('webhooks', 'add', 'http://127.0.0.1:8080/x')).code).toBe(0);
    // A public IPv4 address through NAT64 or 6to4 is an ordinary destination.
    for (const url of ['http://[64:ff9b::808:808]/x', 'http://[2002:808:808::1]/x']) expect((await cli('webhooks', 'add', url)).code, url).toBe(0);
    await db.execute(sql`delete from webhooks`);
  });

  it('the check is made again when sending: a webhook that now points at loopback is not called', async () => {
    const hook = await receiver();
    // Written straight to the table, as a row from before this rule or a name that now resolves elsewhere would be.
    await db.execute(sql`insert into webhooks (id, url, events) values ('whk_loopback0000000', ${hook.url}, '{task.dead_lettered}')`);
    await deadLetterOne('rebound');
    await webhookDispatcherCreate({ db, maxAttempts: 1, allowHosts: [] }).runOnce();
    expect(hook.hits()).toBe(0);
    expect(await deliveries()).toEqual([expect.objectContaining({ status: 'failed', last_error: expect.stringMatching(/refused: 127\.0\.0\.1 is a loopback/) })]);
    await db.execute(sql`delete from webhooks`);
  });

  it('a receiver that answers with an endless body is cut off: the delivery counts, the server reads no more than 64 KiB', async () => {
    await db.execute(sql`delete from webhook_deliveries`);
    const hook = await receiver(true);
    await db.execute(sql`insert into webhooks (id, url, events) values ('whk_endless00000000', ${hook.url}, '{task.dead_lettered}')`);
    await deadLetterOne('endless');
    await webhookDispatcherCreate({ db, allowHosts: ['127.0.0.1'], timeoutSec: 10 }).runOnce();
    expect(hook.hits()).toBe(1);
    expect(await deliveries()).toEqual([expect.objectContaining({ status: 'delivered', attempts: 1 })]);
    await db.execute(sql`delete from webhooks`);
  });

  it('listings hide credentials in URLs and never show the signing secret', async () => {
    expect((await cli('webhooks', 'add', 'https://deploy:hunter2@hooks.example.com/x?token=abc&team=ops', '--secret', 'shh')).code).toBe(0);
    const listed = await cli('webhooks', 'list', '--json');
    const [w] = listed.json();
    expect(w.url).toBe('https://***@hooks.example.com/x?token=***&team=ops');
    expect(listed.stdout).not.toMatch(/hunter2|abc|shh/);
    expect((await cli('webhooks', 'list')).stdout).not.toMatch(/hunter2|token=abc/);
  });
});

describe('security headers', () => {
  it('the dashboard and the API answer with a CSP that allows only dagent\'s own scripts, no framing and no sniffing', async () => {
    const server = await serverStart(database);
    for (const path of ['/', '/assets/app.js', '/healthz']) {
      const res = await fetch(`${server.url}${path}`);
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp, path).toContain("script-src 'self'");
      expect(csp, path).toContain("frame-ancestors 'none'");
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
      expect(res.headers.get('referrer-policy'), path).toBe('no-referrer');
    }
    await server.stop();
  });
});
