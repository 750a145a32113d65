import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Db } from '../db/connection.js';
import { DagentError, DagValidationError } from '../errors.js';
import { tokenTouch, tokenVerify } from '../engine/tokens.js';
import { routesRegister } from './routes/index.js';
import { EventHub } from './event-hub.js';
import { openApiDocument } from './openapi.js';
import type { HttpDeps } from './deps.js';
import { MetricsCollector } from '../observability/metrics.js';

export interface HttpOptions {
  db: Db;
  /** For the event stream's LISTEN connection. */
  databaseUrl: string;
  log: Logger;
  /** Backpressure for POST /api/dags (see SubmitOptions.maxQueued). Default: none. */
  maxQueued?: number;
  /** Largest request body accepted; bigger ones get 413. Default 1 MiB (the DAG file limit). */
  bodyLimitBytes?: number;
  /** Serve /metrics without a token (for a scraper on a trusted network). Default false: an admin token is needed. */
  metricsPublic?: boolean;
  /** How often the event stream re-reads when no NOTIFY came (ms). Default 1000. */
  streamPollMs?: number;
}

export const HTTP_DEFAULTS = { port: 7070, host: '127.0.0.1', bodyLimitBytes: 1024 * 1024 } as const;

/** Statuses for the engine's error codes; anything else is a 500. */
const STATUS_BY_CODE: Record<string, number> = {
  INVALID_INPUT: 400, DAG_INVALID: 400, CYCLE: 400, UNAUTHORIZED: 401, FORBIDDEN: 403, NOT_FOUND: 404,
  LEASE_LOST: 409, ILLEGAL_TRANSITION: 409, TRANSITION_RACED: 409, CONFLICT: 409, DLQ_RESOLVED: 409, BUDGET_EXCEEDED: 409, BACKPRESSURE: 429,
};

export interface HttpServer {
  app: FastifyInstance;
  hub: EventHub;
  /** Listen; resolves to the base URL. */
  listen(port?: number, host?: string): Promise<string>;
  close(): Promise<void>;
}

/** The HTTP API, event stream, metrics and dashboard on one Fastify instance. */
export async function httpServerCreate(o: HttpOptions): Promise<HttpServer> {
  const log = o.log.child({ component: 'http' });
  const app = Fastify({ loggerInstance: log as FastifyBaseLogger, bodyLimit: o.bodyLimitBytes ?? HTTP_DEFAULTS.bodyLimitBytes });
  const hub = new EventHub({ db: o.db, databaseUrl: o.databaseUrl, log, pollMs: o.streamPollMs });
  const metrics = new MetricsCollector(o.db);

  // A DAG may be posted as YAML text as well as JSON.
  app.addContentTypeParser(['application/yaml', 'application/x-yaml', 'text/yaml', 'text/plain'], { parseAs: 'string' }, (_req, body, done) => done(null, body));

  app.addHook('onRequest', async (req, reply) => {
    const access = req.routeOptions.config.access ?? 'public';
    if (access === 'public' || (access === 'admin' && req.url.startsWith('/metrics') && o.metricsPublic)) return;
    const header = req.headers.authorization;
    const token = header?.startsWith('Bearer ') ? header.slice(7).trim() : undefined;
    const principal = token ? await tokenVerify(o.db, token) : null;
    if (!principal) {
      reply.header('www-authenticate', 'Bearer realm="dagent"');
      throw new DagentError('UNAUTHORIZED', token ? 'invalid or revoked token' : 'missing bearer token (Authorization: Bearer <token>; create one with `dagent tokens create`)');
    }
    if (access === 'admin' && principal.role !== 'admin') throw new DagentError('FORBIDDEN', `this needs an admin token; token ${principal.tokenId} is an agent token`);
    req.principal = principal;
  });

  // Before the response goes out (not onResponse), so a client that saw the answer never races the stamp.
  app.addHook('onSend', async (req, reply, payload) => {
    if (req.principal && reply.statusCode < 400) await tokenTouch(o.db, req.principal.tokenId).catch((err) => log.warn({ err }, 'token last-use stamp failed'));
    return payload;
  });

  app.addHook('onResponse', async (req, reply) => {
    log.debug({ method: req.method, url: req.url, status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'request');
  });

  app.setErrorHandler((err: FastifyError | DagentError | Error, req, reply) => {
    if (err instanceof DagentError) {
      const status = STATUS_BY_CODE[err.code] ?? 500;
      if (err.code === 'BACKPRESSURE') reply.header('retry-after', String(err.details.retryAfterSec));
      const body: Record<string, unknown> = { code: err.code, message: err.message, ...err.details };
      if (err instanceof DagValidationError) body.problems = err.problems;
      return reply.status(status).send({ error: body });
    }
    const fe = err as FastifyError;
    if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return reply.status(413).send({ error: { code: 'BODY_TOO_LARGE', message: `request body is larger than ${o.bodyLimitBytes ?? HTTP_DEFAULTS.bodyLimitBytes} bytes` } });
    }
    if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
      const code = fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' ? 'UNSUPPORTED_MEDIA_TYPE' : 'BAD_REQUEST';
      return reply.status(fe.statusCode).send({ error: { code, message: `${fe.message}` } });
    }
    req.log.error({ err, url: req.url }, 'request failed');
    return reply.status(500).send({ error: { code: 'INTERNAL', message: 'internal error (logged on the server)' } });
  });

  app.setNotFoundHandler((req, reply) => reply.status(404).send({ error: { code: 'NOT_FOUND', message: `no route ${req.method} ${req.url.split('?')[0]}` } }));

  routesRegister(app, { db: o.db, log, hub, metrics, maxQueued: o.maxQueued });
  await app.ready();

  return {
    app,
    hub,
    async listen(port = HTTP_DEFAULTS.port, host = HTTP_DEFAULTS.host) {
      await app.listen({ port, host });
      const addr = app.server.address();
      const bound = typeof addr === 'object' && addr ? addr.port : port;
      return `http://${host.includes(':') ? `[${host}]` : host}:${bound}`;
    },
    async close() {
      await hub.close();
      metrics.close();
      await app.close();
    },
  };
}

/** The OpenAPI document without a running server: the routes are registered on a bare instance (handlers never run). */
export async function openApiDocumentBuild(): Promise<Record<string, unknown>> {
  const app = Fastify();
  routesRegister(app, {} as HttpDeps);
  await app.close();
  return openApiDocument();
}
