import { readFileSync } from 'node:fs';
import Fastify, { LogController, type FastifyError, type FastifyInstance } from 'fastify';
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
/** Largest request body: a 4 MiB payload (MaxUserPayloadBytes' default) in base64 within JSON fits. */
const BODY_LIMIT = 8 * 1024 * 1024;
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
    bodyLimit: BODY_LIMIT,
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
  // Who is asking, before the rate limit (which counts only requests without a valid token).
  app.addHook('onRequest', async (request) => {
    request.principal = tokens.resolve(request.headers.authorization);
  });
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
  // The token is checked before the body is validated (no schema detail to strangers), on unknown routes too.
  app.addHook('preValidation', async (request, reply) => {
    if (request.routeOptions.config.public === true) return;
    if (request.principal !== undefined) return;
    await limitFailures.call(app, request, reply);
    throw new ApiError(
      'BIFRO_API_UNAUTHORIZED',
      request.headers.authorization === undefined ? 'missing Authorization: Bearer <token>' : 'the bearer token is not valid',
    );
  });
  app.addHook('onResponse', async (request, reply) => {
    request.log.info(
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
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send({ code: 'BIFRO_API_NOT_FOUND', message: `no route ${request.method} ${request.url.split('?')[0]}` }),
  );
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
    await app.register(swaggerUi, { routePrefix: DOCS_PREFIX, uiConfig: { persistAuthorization: false } });
  }
  if (api.dashboard) await registerDashboard(app);
  app.get('/api/v1/openapi.json', { schema: { hide: true }, config: { public: true } }, async () => app.swagger());
  for (const register of API_ROUTES) register(app, ctx);
  await app.ready();
  return app;
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
