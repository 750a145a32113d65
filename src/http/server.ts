import helmet from '@fastify/helmet';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import { CLAIM_WAIT_DEFAULTS, CONFIG_DEFAULTS, LIMITS } from '../config/index.js';
import { errorMessage, isConnectionLost, isTransientConflict } from '../db/pg-errors.js';
import type { Db } from '../db/handle.js';
import type { ReadyListener } from '../db/ready-listener.js';
import { groupProbe } from '../claim-wait/claim-when-ready.js';
import { ClaimWaiters } from '../claim-wait/waiters.js';
import type { Socket } from 'node:net';
import {
  BadRequestError, BodyTooLargeError, DagentError, DagValidationError, ERROR_CODES, ForbiddenError, HeadersTooLargeError, InternalError,
  InvalidInputError, NotFoundError, RequestTimeoutError, UnauthorizedError, UnavailableError, UnsupportedMediaTypeError, UriTooLongError,
} from '../errors.js';
import { jsonTextTooDeep, utf8Decode } from '../json-guard.js';
import { tokenTouch, tokenVerify } from '../auth/tokens.js';
import { TokenRevocations } from '../auth/revocations.js';
import { tenantObjectsCheck, tenantRouteRefuse } from '../auth/tenant-reach.js';
import { ACCESS_ROLES, routeResponsesCheck } from './route.js';
import { routesRegister } from './routes/index.js';
import { EventHub } from './event-hub.js';
import { StreamFeeds } from './stream-feeds.js';
import { openApiDocument } from './openapi.js';
import type { HttpDeps } from './deps.js';
import { MetricsCollector } from '../observability/metrics.js';

export interface HttpOptions {
  db: Db;
  /** For the LISTEN connection of the event stream and the waiting claims: `Database.sessionUrl` (direct, past any pooler). */
  databaseUrl: string;
  log: Logger;
  /** Backpressure for POST /api/dags (see SubmitOptions.maxQueued). Default: none. */
  maxQueued?: number;
  /** Directories beyond the working directory that paths in a posted DAG may reach (DAGENT_FILE_ROOTS). Default none. */
  fileRoots?: readonly string[];
  /** Largest request body accepted; bigger ones get 413. Default LIMITS.dagFileBytes (a DAG file's worth). */
  bodyLimitBytes?: number;
  /** Serve /metrics without a token (for a scraper on a trusted network). Default false: an admin token is needed. */
  metricsPublic?: boolean;
  /** How often the event stream re-reads when no NOTIFY came (ms). Default 1000. */
  streamPollMs?: number;
  /** The process's LISTEN connection (READY, events and revocation channels), shared with its agents. Default: the event stream and the waiting claims open their own. */
  listener?: ReadyListener;
  /** The node's waiting claims, shared with its agents and MCP sessions (nodeStart). Default: the server's own, closed with it. */
  claimWaiters?: ClaimWaiters;
  /**
   * Parse every JSON answer against its route's response schema before it is sent, and answer a mismatch with a 500
   * naming the route and the field (route.ts routeResponsesCheck): for tests (DAGENT_CHECK_RESPONSES). Default false.
   */
  checkResponses?: boolean;
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
  const bodyLimit = o.bodyLimitBytes ?? LIMITS.dagFileBytes;
  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    bodyLimit,
    // A path parameter as sent, percent-encoded: a step name of STEP_NAME_MAX (200) characters, each up to 4 UTF-8
    // bytes written as %XX, is 2,400 (the router's default, 100, refused a 101-character name as URI_TOO_LONG).
    routerOptions: { maxParamLength: 2_400 },
    // Errors the router raises before a route runs (a malformed URL, an overlong parameter) take the API's shape too.
    frameworkErrors: (err, _req, reply) => {
      const { error, status } = httpErrorOf(err, bodyLimit);
      void (reply as FastifyReply).status(status).send(errorBody(error));
    },
    // And those Node's HTTP parser raises before Fastify sees a request.
    clientErrorHandler: clientErrorAnswer,
  });
  const hub = new EventHub({ db: o.db, databaseUrl: o.databaseUrl, log, pollMs: o.streamPollMs, listener: o.listener });
  const streams = new StreamFeeds({ db: o.db, databaseUrl: o.databaseUrl, log, listener: o.listener, pollMs: o.streamPollMs });
  const metrics = new MetricsCollector(o.db);
  const claimWaiters = o.claimWaiters ?? new ClaimWaiters({
    databaseUrl: o.databaseUrl, log, listener: o.listener, perAgent: CLAIM_WAIT_DEFAULTS.waitingPerAgent, max: CLAIM_WAIT_DEFAULTS.waitingMax, readyInGroup: groupProbe(o.db),
  });
  const revocations = new TokenRevocations({ db: o.db, databaseUrl: o.databaseUrl, log, listener: o.listener });
  const closing = new AbortController();
  metrics.processGauge('dagent_claims_waiting', 'long-poll claims (HTTP wait_sec, MCP next_task) under way on this node', () => claimWaiters.size);

  // Security headers on every answer (the dashboard's pages above all): only its own scripts, styles and
  // connections, never framed (clickjacking), no content-type sniffing, no referrer leaking tokens in URLs.
  await app.register(helmet, {
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"], scriptSrc: ["'self'"], styleSrc: ["'self'"], imgSrc: ["'self'", 'data:'], connectSrc: ["'self'"],
        fontSrc: ["'self'"], objectSrc: ["'none'"], baseUri: ["'self'"], formAction: ["'self'"], frameAncestors: ["'none'"],
      },
    },
    referrerPolicy: { policy: 'no-referrer' },
  });

  // JSON bodies: strict UTF-8 and bounded nesting are checked on the raw bytes, before the parser
  // (whose recursion a deep enough body overflows); __proto__ and constructor.prototype keys are refused.
  const jsonParse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    const text = bodyText(body as Buffer);
    if (jsonTextTooDeep(text, LIMITS.jsonDepth)) throw new InvalidInputError(`body: nested deeper than ${LIMITS.jsonDepth} levels`);
    jsonParse(req, text, done);
  });
  // A DAG may be posted as YAML text as well as JSON.
  app.addContentTypeParser(['application/yaml', 'application/x-yaml', 'text/yaml', 'text/plain'], { parseAs: 'buffer' }, (_req, body, done) => done(null, bodyText(body as Buffer)));

  app.addHook('onRequest', async (req, reply) => {
    const access = req.routeOptions.config.access ?? 'public';
    if (access === 'public' || (req.url.startsWith('/metrics') && o.metricsPublic)) return;
    // The scheme is case-insensitive (RFC 7235): Bearer, bearer, BEARER.
    const token = /^bearer[ \t]+(\S+)[ \t]*$/i.exec(req.headers.authorization ?? '')?.[1];
    const principal = token ? await tokenVerify(o.db, token) : null;
    if (!principal) {
      reply.header('www-authenticate', 'Bearer realm="dagent"');
      throw new UnauthorizedError(token ? 'invalid or revoked token' : 'missing bearer token (Authorization: Bearer <token>; create one with `dagent tokens create`)');
    }
    const allowed = ACCESS_ROLES[access];
    if (!allowed.includes(principal.role)) {
      throw new ForbiddenError(`this needs a token with role ${allowed.join(' or ')}; token ${principal.tokenId} has role ${principal.role}`, { role: principal.role });
    }
    // A route that declares no reach is treated as the whole deployment's: a scoped token is refused, never let through.
    const reach = req.routeOptions.config.tenants ?? 'deployment';
    tenantRouteRefuse(principal, reach, access);
    // Objects named in the path: checked by `route` once the request was read (a bad one answers alike for any id).
    req.tenantObjectsCheck = () => tenantObjectsCheck(o.db, principal, reach, req.params as Record<string, string>);
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
    if (error.code === 'BACKPRESSURE' || error.code === 'UNAVAILABLE') reply.header('retry-after', String(error.details.retryAfterSec));
    if (error.code === 'UNAVAILABLE') req.log.warn({ err: errorMessage(err), url: req.url }, 'database unavailable; answered 503');
    return reply.status(status).send(errorBody(error));
  });

  app.setNotFoundHandler((req, reply) => {
    const error = new NotFoundError('route', `${req.method} ${req.url.split('?')[0]}`);
    return reply.status(ERROR_CODES.NOT_FOUND.status).send(errorBody(error));
  });

  if (o.checkResponses) routeResponsesCheck(app);
  routesRegister(app, { db: o.db, log, hub, streams, metrics, claimWaiters, revocations, closing: closing.signal, maxQueued: o.maxQueued, fileRoots: o.fileRoots });
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
      // Waiting claims first: the server waits for requests in flight, and a long poll may have 30 s to go.
      closing.abort();
      if (!o.claimWaiters) await claimWaiters.close();
      await hub.close();
      await streams.close();
      metrics.close();
      await app.close();
      await revocations.close();
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
  if (fe.code === 'FST_ERR_MAX_PARAM_LENGTH') return { error: new UriTooLongError('a path parameter is longer than the server reads'), status: ERROR_CODES.URI_TOO_LONG.status };
  // Fastify's other 4xx (malformed JSON, a URL it cannot route) keep their status, under the API's code.
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) return { error: new BadRequestError(fe.message), status: fe.statusCode };
  if (isConnectionLost(err)) return { error: new UnavailableError(), status: ERROR_CODES.UNAVAILABLE.status };
  // A deadlock victim or serialization failure was rolled back whole: the same request, made again, is safe.
  if (isTransientConflict(err)) {
    return { error: new UnavailableError(1, 'a concurrent write conflicted with this request and it was rolled back; retry in 1s (a report made again is applied once)'), status: ERROR_CODES.UNAVAILABLE.status };
  }
  return { error: new InternalError(), status: ERROR_CODES.INTERNAL.status };
}

/** Request body bytes as text; bytes that are not UTF-8 are a 400 naming the offset. */
function bodyText(body: Buffer): string {
  const r = utf8Decode(body);
  if ('invalidAt' in r) throw new InvalidInputError(`body: not valid UTF-8 (byte ${r.invalidAt})`, { offset: r.invalidAt });
  return r.text;
}

/** Node's HTTP parser refused a request (headers too large, a timeout, garbage): answer in the API's shape, then close. */
function clientErrorAnswer(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const error = err.code === 'HPE_HEADER_OVERFLOW' ? new HeadersTooLargeError()
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? new RequestTimeoutError()
      : new BadRequestError('the request could not be parsed as HTTP');
  const status = ERROR_CODES[error.code].status ?? 400;
  const body = JSON.stringify(errorBody(error));
  if (socket.writable) socket.write(`HTTP/1.1 ${status} ${error.code}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${body}`);
  socket.destroy();
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
