import { readFileSync } from 'node:fs';
import Fastify, {
  LogController,
  errorCodes,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import rateLimit from '@fastify/rate-limit';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { ApiConfig } from '../base/config-types';
import { CORE_VERSION } from '../plugin-host/core-version';
import type { ApiContext } from './api-context';
import { TokenTable } from './api-auth';
import { ApiError, ERROR_BODY_SCHEMA } from './api-errors';
import { API_ROUTES } from './api-routes';
import { registerDashboard } from './dashboard';

/** Where the OpenAPI browser page is served (with `api.docsPage`). */
export const DOCS_PREFIX = '/api/v1/docs';
/**
 * Largest body of a request whose token is verified: a 4 MiB payload (MaxUserPayloadBytes'
 * default) in base64 within JSON fits.
 */
const BODY_LIMIT = 8 * 1024 * 1024;
/**
 * Largest body of a request no token vouches for, i.e. on a public route (health, readiness, the
 * OpenAPI document, the docs and dashboard pages: none takes a body). Small, so that a stranger
 * makes the broker buffer and parse little: 64 KiB of JSON parses in well under a millisecond of
 * the event loop the MQTT clients share, yet it is far above any body a public route could need.
 */
const PUBLIC_BODY_LIMIT = 64 * 1024;
/**
 * The page of the OpenAPI document (swagger-ui) runs only its own scripts and styles, calls only
 * this API ("Try it out"), and cannot be framed. The one inline style it needs is the colours of
 * its logo (an SVG `<style>` in swagger-ui-standalone-preset.js, allowed by its hash: swagger-ui is
 * pinned, and the docs page test in Chromium fails on any refused style or script).
 */
const DOCS_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');
/** A 65535-byte client id or topic, every byte percent-encoded. */
const MAX_PARAM_LENGTH = 65535 * 3;

/** The admin API once listening. */
export interface RunningApi {
  readonly app: FastifyInstance;
  readonly host: string;
  readonly port: number;
  /** `http(s)://host:port`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * The admin API as a fastify instance, every route registered and ready (not listening): what
 * {@link startApi} listens with, and what tests `inject` into.
 */
export async function buildApi(ctx: ApiContext, api: ApiConfig): Promise<FastifyInstance> {
  const tls = api.tls;
  const app = Fastify({
    loggerInstance: ctx.logger.child({ component: 'api' }),
    logController: new LogController({ disableRequestLogging: true }),
    // Every route reads at most this, except those that need a token (raised below, once routes exist).
    bodyLimit: PUBLIC_BODY_LIMIT,
    // A path that is not valid percent-encoding, or a parameter over MAX_PARAM_LENGTH.
    frameworkErrors: answerBadPath,
    // Path parameters hold client ids and topics: up to 65535 bytes in MQTT, percent-encoded (× 3).
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Unknown fields are refused (every body schema sets additionalProperties: false), not dropped.
    ajv: { customOptions: { removeAdditional: false, allErrors: false } },
    ...(tls !== undefined
      ? {
          https: {
            cert: readFileSync(tls.cert),
            key: readFileSync(tls.key),
            ...(tls.ca !== undefined ? { ca: readFileSync(tls.ca) } : {}),
          },
        }
      : {}),
  }) as unknown as FastifyInstance;

  const tokens = new TokenTable(api.tokens);
  app.decorateRequest('principal', undefined);
  // Failed authentication is rate limited per address; requests with a valid token never count.
  await app.register(rateLimit, { global: false });
  const limitFailures = app.rateLimit({
    max: api.authFailuresPerMinute,
    timeWindow: 60_000,
    errorResponseBuilder: (_request, context) =>
      new ApiError(
        'BIFRO_API_RATE_LIMITED',
        `more than ${context.max} requests without a valid token from this address within a minute; retry in ${Math.ceil(context.ttl / 1000)} s`,
      ),
  });
  /**
   * Who is asking and whether they may, from the headers alone: a stranger's body is never read,
   * let alone parsed (parsing a large JSON body holds the event loop, and so every MQTT client,
   * for up to seconds). Unknown routes too: strangers get no list of routes, and no schema detail.
   */
  async function admit(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    request.principal = tokens.resolve(request.headers.authorization);
    if (request.principal === undefined && request.routeOptions.config.public !== true) {
      await limitFailures.call(app, request, reply);
      throw new ApiError(
        'BIFRO_API_UNAUTHORIZED',
        request.headers.authorization === undefined ? 'missing Authorization: Bearer <token>' : 'the bearer token is not valid',
      );
    }
    // No route would use the body: answered before reading it.
    if (request.is404) throw notFound(request);
    // A stranger on a public route: the small limit, on the announced length, before reading (a
    // GET's body is never parsed, but node would read it all to throw it away).
    if (request.principal === undefined && !withinPublicLimit(request)) throw new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE();
  }
  app.addHook('onRequest', async (request, reply) => {
    try {
      await admit(request, reply);
    } catch (err) {
      closeIfBodyUnread(request, reply);
      throw err;
    }
  });
  app.addHook('onResponse', async (request, reply) => {
    request.log[requestLogLevel(reply.statusCode)](
      {
        method: request.method,
        route: request.routeOptions.url,
        url: request.url,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
        token: request.principal?.name,
        remote: request.ip,
      },
      'api request',
    );
  });
  app.setErrorHandler((err: FastifyError | ApiError, request, reply) => {
    if (err instanceof ApiError) return reply.code(err.statusCode).send(err.body());
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      return reply.code(413).send({ code: 'BIFRO_API_INVALID_REQUEST', message: tooLarge(request) });
    if (err.validation !== undefined)
      return reply
        .code(400)
        .send({ code: 'BIFRO_API_INVALID_REQUEST', message: `${err.validationContext ?? 'request'}${err.message.replace(/^\w+/, '')}` });
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) return reply.code(status).send({ code: 'BIFRO_API_INVALID_REQUEST', message: err.message });
    request.log.error({ err, route: request.routeOptions.url }, 'api request failed');
    return reply
      .code(500)
      .send({ code: 'BIFRO_API_INTERNAL', message: `internal error (request ${request.id}; details in the broker log)` });
  });
  app.setNotFoundHandler(async (request) => {
    throw notFound(request);
  });
  app.addSchema(ERROR_BODY_SCHEMA);

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Bifro admin API',
        version: CORE_VERSION,
        description: 'Manage a Bifro MQTT broker: tenants, sessions, retained messages, bans, plugins, metrics (docs/api.md).',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
  });
  if (api.docsPage) {
    app.addHook('onRoute', (route) => {
      if (route.url.startsWith(DOCS_PREFIX)) route.config = { ...(route.config ?? {}), public: true };
    });
    await app.register(swaggerUi, { routePrefix: DOCS_PREFIX, uiConfig: { persistAuthorization: false }, staticCSP: DOCS_CSP });
  }
  if (api.dashboard) await registerDashboard(app);
  // The routes below that need a token read up to BODY_LIMIT, only once the token is verified. Added
  // after the docs and dashboard, whose routes are public but marked so by their own onRoute hooks.
  app.addHook('onRoute', (route) => {
    if (route.config?.public !== true) route.bodyLimit ??= BODY_LIMIT;
  });
  app.get('/api/v1/openapi.json', { schema: { hide: true }, config: { public: true } }, async () => app.swagger());
  for (const register of API_ROUTES) register(app, ctx);
  await app.ready();
  return app;
}

/**
 * The level of a request's log line. Served requests are debug: an open dashboard tab polls every
 * 2 s, which at info buried everything else (174 of 190 lines after 3 minutes with two tabs).
 * Refused tokens and scopes are warn, other refusals info; a 5xx is also logged at error, with
 * its cause, by the error handler.
 */
function requestLogLevel(status: number): 'debug' | 'info' | 'warn' {
  if (status === 401 || status === 403 || status >= 500) return 'warn';
  return status >= 400 ? 'info' : 'debug';
}

/** The path of a request, without its query. */
function pathOf(request: FastifyRequest): string {
  return request.url.split('?')[0]!;
}

function notFound(request: FastifyRequest): ApiError {
  return new ApiError('BIFRO_API_NOT_FOUND', `no route ${request.method} ${pathOf(request)}`);
}

/** `n` bytes as the docs say it: 8 MiB, 64 KiB. */
function sizeText(n: number): string {
  if (n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MiB`;
  return n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`;
}

/** A body of at most PUBLIC_BODY_LIMIT, its length announced (Content-Length, not chunked), or none. */
function withinPublicLimit(request: FastifyRequest): boolean {
  const { headers } = request;
  return headers['transfer-encoding'] === undefined && Number(headers['content-length'] ?? 0) <= PUBLIC_BODY_LIMIT;
}

function tooLarge(request: FastifyRequest): string {
  return request.principal === undefined
    ? `a request without a valid token may send a body of ${sizeText(PUBLIC_BODY_LIMIT)} at most, with a Content-Length`
    : `the body is above the ${sizeText(request.routeOptions.bodyLimit)} this route accepts`;
}

/** A path fastify cannot route: not valid percent-encoding (400), or a parameter over MAX_PARAM_LENGTH (414). */
function answerBadPath(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  closeIfBodyUnread(request, reply);
  const tooLong = err.code === 'FST_ERR_MAX_PARAM_LENGTH';
  const what = tooLong ? `a path parameter longer than ${MAX_PARAM_LENGTH} characters` : 'not valid percent-encoding';
  void reply.code(tooLong ? 414 : 400).send({ code: 'BIFRO_API_INVALID_REQUEST', message: `the path ${pathOf(request)} is ${what}` });
}

/**
 * An answer given before the body was read ends the connection: the rest of the body is then
 * never read (node would otherwise read it to its end to keep the connection).
 */
function closeIfBodyUnread(request: FastifyRequest, reply: FastifyReply): void {
  const { headers } = request;
  if (headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0) reply.header('connection', 'close');
}

/** Build the admin API and listen on `api.host:api.port` (127.0.0.1:8091 unless configured). */
export async function startApi(ctx: ApiContext, api: ApiConfig): Promise<RunningApi> {
  const app = await buildApi(ctx, api);
  await app.listen({ host: api.host, port: api.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : api.port;
  const scheme = api.tls !== undefined ? 'https' : 'http';
  const hostPart = api.host.includes(':') ? `[${api.host}]` : api.host;
  return { app, host: api.host, port, url: `${scheme}://${hostPart}:${port}`, close: () => app.close() };
}
