import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { CONFIG_DEFAULTS, LIMITS } from '../config/index.js';
import type { Db } from '../db/connection.js';
import {
  BadRequestError, BodyTooLargeError, DagentError, DagValidationError, ERROR_CODES, ForbiddenError, InternalError, NotFoundError,
  UnauthorizedError, UnsupportedMediaTypeError,
} from '../errors.js';
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
  /** Largest request body accepted; bigger ones get 413. Default LIMITS.dagFileBytes (a DAG file's worth). */
  bodyLimitBytes?: number;
  /** Serve /metrics without a token (for a scraper on a trusted network). Default false: an admin token is needed. */
  metricsPublic?: boolean;
  /** How often the event stream re-reads when no NOTIFY came (ms). Default 1000. */
  streamPollMs?: number;
}


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
  const app = Fastify({ loggerInstance: log as FastifyBaseLogger, bodyLimit: o.bodyLimitBytes ?? LIMITS.dagFileBytes });
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
      throw new UnauthorizedError(token ? 'invalid or revoked token' : 'missing bearer token (Authorization: Bearer <token>; create one with `dagent tokens create`)');
    }
    if (access === 'admin' && principal.role !== 'admin') throw new ForbiddenError(`this needs an admin token; token ${principal.tokenId} is an agent token`);
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
    const { error, status } = httpErrorOf(err, o.bodyLimitBytes ?? LIMITS.dagFileBytes);
    if (error instanceof InternalError) req.log.error({ err, url: req.url }, 'request failed');
    if (error.code === 'BACKPRESSURE') reply.header('retry-after', String(error.details.retryAfterSec));
    return reply.status(status).send(errorBody(error));
  });

  app.setNotFoundHandler((req, reply) => {
    const error = new NotFoundError('route', `${req.method} ${req.url.split('?')[0]}`);
    return reply.status(ERROR_CODES.NOT_FOUND.status).send(errorBody(error));
  });

  routesRegister(app, { db: o.db, log, hub, metrics, maxQueued: o.maxQueued });
  await app.ready();

  return {
    app,
    hub,
    async listen(port = CONFIG_DEFAULTS.httpPort, host = CONFIG_DEFAULTS.httpHost) {
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

/**
 * What an error becomes on the wire: dagent's own errors keep their code (status
 * from ERROR_CODES); Fastify's refusals of a request it cannot read take the API's
 * codes; anything else is INTERNAL, a 500 whose cause stays in the server's log.
 */
function httpErrorOf(err: unknown, bodyLimitBytes: number): { error: DagentError; status: number } {
  if (err instanceof DagentError) return { error: err, status: ERROR_CODES[err.code].status ?? 500 };
  const fe = err as FastifyError;
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return { error: new BodyTooLargeError(bodyLimitBytes), status: ERROR_CODES.BODY_TOO_LARGE.status };
  if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return { error: new UnsupportedMediaTypeError(fe.message), status: ERROR_CODES.UNSUPPORTED_MEDIA_TYPE.status };
  // Fastify's other 4xx (malformed JSON, a URL it cannot route) keep their status, under the API's code.
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) return { error: new BadRequestError(fe.message), status: fe.statusCode };
  return { error: new InternalError(), status: ERROR_CODES.INTERNAL.status };
}

/** `{error: {code, message, …details}}`, the shape of every refusal. */
function errorBody(e: DagentError): { error: Record<string, unknown> } {
  const body: Record<string, unknown> = { code: e.code, message: e.message, ...e.details };
  if (e instanceof DagValidationError) body.problems = e.problems;
  return { error: body };
}

/** The OpenAPI document without a running server: the routes are registered on a bare instance (handlers never run). */
export async function openApiDocumentBuild(): Promise<Record<string, unknown>> {
  const app = Fastify();
  routesRegister(app, {} as HttpDeps);
  await app.close();
  return openApiDocument();
}
